"""The state.db schema, version 11 of the reference, plus our numbered migrations.

The DDL below is the reference's table for table and column for column, so a
tool that reads the reference schema reads ours. FTS5 tables are *inline*
(they store their own copy of the text) and cover content, tool_name and
tool_calls, as version 11 of the reference specifies.

Two counters: ``schema_version`` is the reference's and always says which
reference version the file is at (11), so a later reference release that
migrates 11 -> 12 runs its migration on our file; the gateway's own tables are
counted in ``state_meta`` under ``gateway_schema_version``.
"""

from __future__ import annotations

from ._gateway_schema import GATEWAY_MIGRATIONS

REFERENCE_VERSION = 11
GATEWAY_VERSION_KEY = "gateway_schema_version"
# Before the gateway had its own counter its steps 1..3 were counted on the
# reference's, as 12..14; a file saying so is read as reference 11 + that step.
SHARED_COUNTER_OFFSET = REFERENCE_VERSION
SHARED_COUNTER_VERSIONS = range(12, 15)

SESSIONS_DDL = """
CREATE TABLE IF NOT EXISTS sessions (
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
)
"""

MESSAGES_DDL = """
CREATE TABLE IF NOT EXISTS messages (
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
)
"""

STATE_META_DDL = """
CREATE TABLE IF NOT EXISTS state_meta (
    key TEXT PRIMARY KEY,
    value TEXT
)
"""

SCHEMA_VERSION_DDL = """
CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER NOT NULL
)
"""

INDEXES_DDL = (
    "CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC)",
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique ON sessions(title) WHERE title IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp)",
)

# The FTS5 tables keep the reference's names and columns, so a v11 reader's
# ``messages_fts MATCH ?`` (and snippet()) works on them. Two layouts:
# ``inline`` (the reference's: each table keeps its own copy of the text) and
# ``external`` (ours: the text is read from ``messages``; the trigram table
# covers what substring and CJK search need, see ``trigram_source``).
# ``state_meta.fts_layout`` says which one a file has.
FTS_LAYOUT_KEY = "fts_layout"
LAYOUT_INLINE, LAYOUT_EXTERNAL = "inline", "external"
#: every message with an id at or below this state_meta value is in both FTS tables
WATERMARK_KEY = "fts_indexed_through"

INLINE_FTS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, tool_name, tool_calls)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram "
    "USING fts5(content, tool_name, tool_calls, tokenize='trigram')",
)


def external_fts_ddl(suffix: str = "") -> tuple[str, str]:
    return (
        f"CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts{suffix} USING fts5(content, tool_name, tool_calls, "
        "content='messages', content_rowid='id')",
        f"CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram{suffix} USING fts5(content, tool_name, tool_calls, "
        "content='messages', content_rowid='id', tokenize='trigram')",
    )


FTS_DDL = external_fts_ddl()

# The trigram index in the external layout covers what substring and CJK
# search are for: what the people and the model wrote (user and assistant
# content, tool calls), not tool results (about half the text of a typical
# session, and most of the trigram index). Whole words of tool results are
# still found through the word index; a substring or CJK term inside a tool
# result is not (trade-off measured in bench/README.md).
TRIGRAM_ROLES_SQL = "role != 'tool'"


def trigram_source(prefix: str, *, external: bool) -> tuple[str, str]:
    """The (content, tool_name, tool_calls) expressions and the row filter of the trigram index.

    ``prefix`` is "" (a SELECT from messages) or "old." / "new." (a trigger)."""
    p = prefix
    where = f"{p}{TRIGRAM_ROLES_SQL}" if external else "1"
    return f"{p}content, {p}tool_name, {p}tool_calls", where


def _through(key: str) -> str:
    return f"(SELECT CAST(value AS INTEGER) FROM state_meta WHERE key = '{key}')"


def fts_triggers_ddl(layout: str, suffix: str = "", key: str = WATERMARK_KEY) -> tuple[str, ...]:
    """The three triggers: the one place FTS rows are ever deleted (see ``_fts_index``).

    New rows are indexed by the indexer, not on insert: ``messages_fts_insert``
    does nothing, and exists so that a reference writer opening this file does
    not create its own (it uses CREATE TRIGGER IF NOT EXISTS). A row the
    indexer has not reached yet (above the watermark) has nothing to delete.
    """
    w, t = f"messages_fts{suffix}", f"messages_fts_trigram{suffix}"
    external = layout == LAYOUT_EXTERNAL
    old_t, old_where = trigram_source("old.", external=external)
    new_t, new_where = trigram_source("new.", external=external)
    if external:
        delete = (
            f"INSERT INTO {w}({w}, rowid, content, tool_name, tool_calls) "
            "VALUES ('delete', old.id, old.content, old.tool_name, old.tool_calls);\n"
            f"    INSERT INTO {t}({t}, rowid, content, tool_name, tool_calls) "
            f"SELECT 'delete', old.id, {old_t} WHERE {old_where};"
        )
    else:
        delete = f"DELETE FROM {w} WHERE rowid = old.id;\n    DELETE FROM {t} WHERE rowid = old.id;"
    insert = (
        f"INSERT INTO {w}(rowid, content, tool_name, tool_calls) "
        "VALUES (new.id, new.content, new.tool_name, new.tool_calls);\n"
        f"    INSERT INTO {t}(rowid, content, tool_name, tool_calls) SELECT new.id, {new_t} WHERE {new_where};"
    )
    through = _through(key)
    maintain = (
        f"CREATE TRIGGER IF NOT EXISTS messages_fts_delete{suffix} AFTER DELETE ON messages\n"
        f"WHEN old.id <= {through} BEGIN\n    {delete}\nEND",
        f"CREATE TRIGGER IF NOT EXISTS messages_fts_update{suffix}\n"
        f"AFTER UPDATE OF role, content, tool_name, tool_calls ON messages\n"
        f"WHEN old.id <= {through} BEGIN\n    {delete}\n    {insert}\nEND",
    )
    if suffix:  # a table being built beside the live ones: the live names stay as they are
        return maintain
    return (
        "CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages WHEN 0 BEGIN\n    SELECT 1;\nEND",
        *maintain,
    )


FTS_TRIGGERS_DDL = fts_triggers_ddl(LAYOUT_EXTERNAL)

# The reference's v11 triggers (inline tables, indexed on insert): what a file
# written by the reference, or by this gateway before deferred indexing, has.
REFERENCE_FTS_TRIGGERS_DDL = (
    """
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
        VALUES (new.id, new.content, new.tool_name, new.tool_calls);
    INSERT INTO messages_fts_trigram(rowid, content, tool_name, tool_calls)
        VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END
""",
    """
CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    DELETE FROM messages_fts_trigram WHERE rowid = old.id;
END
""",
    """
CREATE TRIGGER IF NOT EXISTS messages_fts_update
AFTER UPDATE OF content, tool_name, tool_calls ON messages BEGIN
    DELETE FROM messages_fts WHERE rowid = old.id;
    DELETE FROM messages_fts_trigram WHERE rowid = old.id;
    INSERT INTO messages_fts(rowid, content, tool_name, tool_calls)
        VALUES (new.id, new.content, new.tool_name, new.tool_calls);
    INSERT INTO messages_fts_trigram(rowid, content, tool_name, tool_calls)
        VALUES (new.id, new.content, new.tool_name, new.tool_calls);
END
""",
)

# Every trigger name any version of the reference ever created on messages; the
# v11 upgrade drops them all before recreating ours.
LEGACY_FTS_TRIGGERS = (
    "messages_fts_insert",
    "messages_fts_delete",
    "messages_fts_update",
    "messages_fts_trigram_insert",
    "messages_fts_trigram_delete",
    "messages_fts_trigram_update",
)

BASE_TABLES_DDL = (SESSIONS_DDL, MESSAGES_DDL, STATE_META_DDL, SCHEMA_VERSION_DDL)

# Columns a table must have, in reference order, with their declared types.
# Used to reconcile databases left by older versions (ALTER TABLE ADD COLUMN).
SESSION_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "TEXT"),
    ("source", "TEXT"),
    ("user_id", "TEXT"),
    ("model", "TEXT"),
    ("model_config", "TEXT"),
    ("system_prompt", "TEXT"),
    ("parent_session_id", "TEXT"),
    ("started_at", "REAL"),
    ("ended_at", "REAL"),
    ("end_reason", "TEXT"),
    ("message_count", "INTEGER DEFAULT 0"),
    ("tool_call_count", "INTEGER DEFAULT 0"),
    ("input_tokens", "INTEGER DEFAULT 0"),
    ("output_tokens", "INTEGER DEFAULT 0"),
    ("cache_read_tokens", "INTEGER DEFAULT 0"),
    ("cache_write_tokens", "INTEGER DEFAULT 0"),
    ("reasoning_tokens", "INTEGER DEFAULT 0"),
    ("billing_provider", "TEXT"),
    ("billing_base_url", "TEXT"),
    ("billing_mode", "TEXT"),
    ("estimated_cost_usd", "REAL"),
    ("actual_cost_usd", "REAL"),
    ("cost_status", "TEXT"),
    ("cost_source", "TEXT"),
    ("pricing_version", "TEXT"),
    ("title", "TEXT"),
    ("api_call_count", "INTEGER DEFAULT 0"),
)

MESSAGE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "INTEGER"),
    ("session_id", "TEXT"),
    ("role", "TEXT"),
    ("content", "TEXT"),
    ("tool_call_id", "TEXT"),
    ("tool_calls", "TEXT"),
    ("tool_name", "TEXT"),
    ("timestamp", "REAL"),
    ("token_count", "INTEGER"),
    ("finish_reason", "TEXT"),
    ("reasoning", "TEXT"),
    ("reasoning_content", "TEXT"),
    ("reasoning_details", "TEXT"),
    ("codex_reasoning_items", "TEXT"),
    ("codex_message_items", "TEXT"),
)




def latest_version() -> int:
    """What ``schema_version`` holds: the reference's version, never the gateway's steps."""
    return REFERENCE_VERSION


def latest_gateway_version() -> int:
    return GATEWAY_MIGRATIONS[-1].version if GATEWAY_MIGRATIONS else 0
