-- Several gateway nodes over one database (issue 26, "Several nodes"): the nodes, the leases
-- that give each session key (lane) and each long-lived connection (role) one holder at a
-- time, and the hand-off inbox a node writes when a message reaches it for a key another
-- node serves. PostgreSQL only: a single SQLite daemon needs none of it.
-- Times are DOUBLE PRECISION seconds since the epoch, as in the other tables, and always
-- the database's clock (now()), never a node's: nodes' clocks may disagree, the server's is one.

CREATE TABLE cluster_nodes (
    node_id      TEXT PRIMARY KEY,
    host         TEXT NOT NULL,
    pid          BIGINT NOT NULL,
    started_at   DOUBLE PRECISION NOT NULL,
    heartbeat_at DOUBLE PRECISION NOT NULL,
    -- what the node reported at its last heartbeat (JSON: roles, lanes): for `status`
    holds        TEXT NOT NULL DEFAULT '{}'
);

-- The fencing tokens: one sequence, so a token is larger than every token handed out before
-- it, for any key (monotonic per key, whichever node takes it and however often rows go).
CREATE SEQUENCE cluster_fence AS BIGINT;

-- kind 'lane' (name = a session key) or 'role' (name = 'telegram', 'discord:0', 'scheduler' ...).
-- A lease whose expires_at has passed belongs to nobody: the next acquire takes it, with a
-- new token.
CREATE TABLE cluster_leases (
    kind        TEXT NOT NULL CHECK (kind IN ('lane', 'role')),
    name        TEXT NOT NULL,
    node_id     TEXT NOT NULL,
    token       BIGINT NOT NULL,
    acquired_at DOUBLE PRECISION NOT NULL,
    expires_at  DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (kind, name)
);
CREATE INDEX cluster_leases_node ON cluster_leases (node_id, kind);

-- Messages handed to the key's owner. A row is written in the receiving node's transaction
-- (with its inbound dedupe row), claimed by the owner under its lease token, and marked done
-- in the transaction that stores the turn's result: a row not done is a turn not answered.
CREATE TABLE cluster_inbox (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_key  TEXT NOT NULL,
    payload      TEXT NOT NULL,
    from_node    TEXT NOT NULL,
    created_at   DOUBLE PRECISION NOT NULL,
    claimed_by   TEXT,
    claim_token  BIGINT,
    claimed_at   DOUBLE PRECISION,
    done_at      DOUBLE PRECISION,
    done_by      TEXT
);
CREATE INDEX cluster_inbox_pending ON cluster_inbox (session_key, id) WHERE done_at IS NULL;
CREATE INDEX cluster_inbox_done ON cluster_inbox (done_at) WHERE done_at IS NOT NULL;
