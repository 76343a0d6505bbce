-- The order sessions were stored in, for ties of started_at. state.db's sessions are a rowid
-- table, and its lists (recent sessions, an ambiguous prefix, the heaviest sessions, a
-- lineage's children) come back in rowid order when two sessions started at the same instant;
-- PostgreSQL has no such order, so a trigger numbers each new session here. A table of its own
-- rather than a column: `SELECT * FROM sessions` keeps exactly the v11 columns.

CREATE TABLE gateway_session_order (
    session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE ON UPDATE CASCADE,
    seq BIGINT GENERATED ALWAYS AS IDENTITY
);

INSERT INTO gateway_session_order (session_id) SELECT id FROM sessions ORDER BY started_at, id;

CREATE FUNCTION gateway_session_order_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO gateway_session_order (session_id) VALUES (NEW.id);
    RETURN NULL;
END
$$;

CREATE TRIGGER sessions_order_add AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION gateway_session_order_add();
