-- The schema of state.db exactly as hermes-gateway left it before the gateway got
-- its own schema counter (commit f53571a): the reference's v11 tables plus the
-- gateway's migrations 12-14, counted on the reference's schema_version (14).
-- Dumped from sqlite_master of a fresh file made by that code, in creation order
-- (FTS5 shadow tables and sqlite_sequence are SQLite's own). Never edit: it is
-- what users' files hold. gateway_release.py builds old files from it.

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    user_id TEXT,
    model TEXT,
    model_config TEXT,
    system_prompt TEXT,
    parent_session_id TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    message_count INTEGER DEFAULT 0,
    tool_call_count INTEGER DEFAULT 0,
    input_tokens INTEGER DEFAULT 0,
    output_tokens INTEGER DEFAULT 0,
    cache_read_tokens INTEGER DEFAULT 0,
    cache_write_tokens INTEGER DEFAULT 0,
    reasoning_tokens INTEGER DEFAULT 0,
    billing_provider TEXT,
    billing_base_url TEXT,
    billing_mode TEXT,
    estimated_cost_usd REAL,
    actual_cost_usd REAL,
    cost_status TEXT,
    cost_source TEXT,
    pricing_version TEXT,
    title TEXT,
    api_call_count INTEGER DEFAULT 0,
    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)
);

CREATE TABLE messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT,
    tool_call_id TEXT,
    tool_calls TEXT,
    tool_name TEXT,
    timestamp REAL NOT NULL,
    token_count INTEGER,
    finish_reason TEXT,
    reasoning TEXT,
    reasoning_content TEXT,
    reasoning_details TEXT,
    codex_reasoning_items TEXT,
    codex_message_items TEXT
);

CREATE TABLE state_meta (
    key TEXT PRIMARY KEY,
    value TEXT
);

CREATE TABLE schema_version (
    version INTEGER NOT NULL
);

CREATE INDEX idx_sessions_source ON sessions(source);

CREATE INDEX idx_sessions_parent ON sessions(parent_session_id);

CREATE INDEX idx_sessions_started ON sessions(started_at DESC);

CREATE UNIQUE INDEX idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL;

CREATE INDEX idx_messages_session ON messages(session_id, timestamp);

CREATE VIRTUAL TABLE messages_fts USING fts5(content, tool_name, tool_calls);

CREATE VIRTUAL TABLE messages_fts_trigram USING fts5(content, tool_name, tool_calls, tokenize='trigram');

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
        VALUES (new.id, new.content, new.tool_name, new.tool_calls);
    INSERT INTO messages_fts_trigram(rowid, content, tool_name, tool_calls)
        VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    DELETE FROM messages_fts_trigram WHERE rowid = old.id;
END;

CREATE TRIGGER messages_fts_update
AFTER UPDATE OF content, tool_name, tool_calls ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    DELETE FROM messages_fts_trigram WHERE rowid = old.id;
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
        VALUES (new.id, new.content, new.tool_name, new.tool_calls);
    INSERT INTO messages_fts_trigram(rowid, content, tool_name, tool_calls)
        VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END;

CREATE TABLE gateway_session_index (
                session_key TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                platform TEXT NOT NULL,
                chat_id TEXT,
                chat_type TEXT,
                thread_id TEXT,
                user_id TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            );

CREATE INDEX idx_gateway_session_index_session ON gateway_session_index(session_id);

CREATE TABLE gateway_inbound_seen (
                platform TEXT NOT NULL,
                delivery_key TEXT NOT NULL,
                seen_at REAL NOT NULL,
                PRIMARY KEY (platform, delivery_key)
            ) WITHOUT ROWID;

CREATE INDEX idx_gateway_inbound_seen_at ON gateway_inbound_seen(seen_at);

CREATE TABLE gateway_outbound (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_key TEXT,
                session_id TEXT,
                platform TEXT NOT NULL,
                chat_id TEXT NOT NULL,
                thread_id TEXT,
                reply_to TEXT,
                text TEXT NOT NULL,
                status TEXT NOT NULL DEFAULT 'pending',
                attempts INTEGER NOT NULL DEFAULT 0,
                error TEXT,
                created_at REAL NOT NULL,
                sent_at REAL
            );

CREATE INDEX idx_gateway_outbound_status ON gateway_outbound(status, created_at);

CREATE TABLE gateway_pending_titles (
                session_key TEXT PRIMARY KEY,
                title TEXT NOT NULL,
                created_at REAL NOT NULL
            );

CREATE INDEX idx_messages_session_id ON messages(session_id, id);

CREATE TABLE gateway_home_channels (
                platform TEXT PRIMARY KEY,
                chat_id TEXT NOT NULL,
                thread_id TEXT,
                chat_type TEXT,
                set_by TEXT,
                updated_at REAL NOT NULL
            );

CREATE TABLE gateway_handoffs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL,
                source_key TEXT NOT NULL,
                source_platform TEXT NOT NULL,
                source_chat_id TEXT,
                source_thread_id TEXT,
                target_platform TEXT NOT NULL,
                target_chat_id TEXT,
                target_thread_id TEXT,
                target_key TEXT,
                state TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'claimed', 'completed', 'failed')),
                error TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            );

CREATE UNIQUE INDEX idx_gateway_handoffs_live ON gateway_handoffs(session_id) WHERE state IN ('pending', 'claimed');

CREATE TABLE gateway_session_bindings (
                session_key TEXT NOT NULL,
                session_id TEXT NOT NULL,
                platform TEXT NOT NULL,
                user_id TEXT,
                first_bound_at REAL NOT NULL,
                PRIMARY KEY (session_key, session_id)
            ) WITHOUT ROWID;

CREATE INDEX idx_gateway_session_bindings_session ON gateway_session_bindings(session_id);
