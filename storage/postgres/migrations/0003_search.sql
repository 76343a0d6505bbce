-- Search (issue 26): the two indexes state.db keeps as FTS5 tables, on PostgreSQL.
--
-- Words (state.db's messages_fts, tokenizer unicode61): a tsvector generated from content,
-- tool_name and tool_calls of every message, with a GIN index. The text is cut into runs of
-- letters and digits first, as unicode61 does ("chat-send" is the two words chat and send,
-- "foo_bar" is foo and bar), and the 'simple' configuration lower-cases each run without
-- stemming or stop words: unicode61 does neither, and English stemming would make "deploying"
-- find "deployment", which state.db does not. Only the first 100 000 characters are indexed:
-- a tsvector holds at most 1 MB, and an INSERT must never fail because a tool result is big.
-- search_tokens counts the words, the document length of the bm25 ranking state.db uses. The
-- tsvector is kept in the row (STORAGE MAIN: compressed, moved out only when the row would not
-- fit a page): ranking reads it for every hit, and a TOAST fetch per hit cost four times more.
--
-- Substrings (state.db's messages_fts_trigram, tokenizer trigram): a pg_trgm GIN index on the
-- same three columns joined by a control character no search term can hold (so no match spans
-- two columns), and like state.db's only for rows whose role is not 'tool': tool results are
-- about half of the text and most of that index, and a whole word of one is still found by the
-- word index (bench/README.md, issue 25). ILIKE '%term%' uses it, also for CJK, which has no
-- spaces between words.
--
-- Code that reads messages names its columns: SELECT * would also return these two.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE FUNCTION hermes_search_words_text(content TEXT, tool_name TEXT, tool_calls TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN regexp_replace(left(concat_ws(' ', content, tool_name, tool_calls), 100000), '[^[:alnum:]]+', ' ', 'g');

CREATE FUNCTION hermes_search_text(content TEXT, tool_name TEXT, tool_calls TEXT) RETURNS TEXT
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN coalesce(content, '') || chr(1) || coalesce(tool_name, '') || chr(1) || coalesce(tool_calls, '');

ALTER TABLE messages
    ADD COLUMN search_words tsvector
        GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, hermes_search_words_text(content, tool_name, tool_calls))) STORED,
    ADD COLUMN search_tokens INTEGER
        GENERATED ALWAYS AS (regexp_count(hermes_search_words_text(content, tool_name, tool_calls), '[[:alnum:]]+')) STORED;

ALTER TABLE messages ALTER COLUMN search_words SET STORAGE MAIN;

CREATE INDEX idx_messages_search_words ON messages USING gin (search_words);

CREATE INDEX idx_messages_search_trgm ON messages
    USING gin (hermes_search_text(content, tool_name, tool_calls) gin_trgm_ops)
    WHERE role <> 'tool';
