-- A handed message's delivery key (issue 26): recording the message as seen on its owner
-- (storage.postgres.inbound.record, in the transaction that stores its question) also settles
-- its inbox row, so a crash before that leaves the row for the chat's next owner to run, and a
-- crash after it never runs the message twice.
ALTER TABLE cluster_inbox ADD COLUMN platform TEXT;
ALTER TABLE cluster_inbox ADD COLUMN delivery_key TEXT;
CREATE INDEX cluster_inbox_delivery ON cluster_inbox (platform, delivery_key) WHERE done_at IS NULL;
