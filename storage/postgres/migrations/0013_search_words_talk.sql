-- Search (issue 26): a second word index, over the messages that are not tool results.
--
-- Discovery (session_search) and most searches read only user and assistant messages, but
-- idx_messages_search_words holds every row, so each tool result a word is in was fetched from
-- the table only to be dropped by the role filter: about 40 % of a word's hits on the bench
-- corpus. The planner takes this partial index whenever the query's roles exclude 'tool' (the
-- substring index, 0003, already leaves tool results out); a search that asks for tool results
-- keeps the full one. The cost: the user and assistant rows are indexed twice (about 60 % more
-- word index, a second GIN insert per such message).
--
-- Built in the migration's transaction (writes to messages wait while it builds; about 40 s per
-- million messages on two vCPUs), with no statement timeout: a node's default (30 s) would fail
-- the migration on a large table and leave the node unable to start.

SET LOCAL statement_timeout = 0;

CREATE INDEX idx_messages_search_words_talk ON messages USING gin (search_words) WHERE role <> 'tool';
