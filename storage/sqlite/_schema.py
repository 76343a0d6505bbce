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

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from ._rekey import rekey_threads

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

FTS_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(content, tool_name, tool_calls)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram "
    "USING fts5(content, tool_name, tool_calls, tokenize='trigram')",
)

FTS_TRIGGERS_DDL = (
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


@dataclass(frozen=True)
class Migration:
    """A numbered step of the gateway's own tables (their counter is ``gateway_schema_version``)."""

    version: int
    name: str
    statements: tuple[str, ...]
    #: a data step SQL alone cannot say, run after ``statements``
    run: Callable[[sqlite3.Connection], None] | None = None


# Gateway tables arrive as numbered migrations; issues that need a table
# append a step here, never edit a released one.
GATEWAY_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "gateway routing index, inbound dedupe, outbound delivery ledger, queued titles",
        (
            # key -> the session a chat is talking to now (rebindable by
            # /resume and /handoff). No foreign key: a session deleted by a CLI
            # leaves a stale entry that the router heals, never a failed write.
            """
            CREATE TABLE IF NOT EXISTS gateway_session_index (
                session_key TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                platform TEXT NOT NULL,
                chat_id TEXT,
                chat_type TEXT,
                thread_id TEXT,
                user_id TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_session_index_session ON gateway_session_index(session_id)",
            """
            CREATE TABLE IF NOT EXISTS gateway_inbound_seen (
                platform TEXT NOT NULL,
                delivery_key TEXT NOT NULL,
                seen_at REAL NOT NULL,
                PRIMARY KEY (platform, delivery_key)
            ) WITHOUT ROWID
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_inbound_seen_at ON gateway_inbound_seen(seen_at)",
            """
            CREATE TABLE IF NOT EXISTS gateway_outbound (
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
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_outbound_status ON gateway_outbound(status, created_at)",
            """
            CREATE TABLE IF NOT EXISTS gateway_pending_titles (
                session_key TEXT PRIMARY KEY,
                title TEXT NOT NULL,
                created_at REAL NOT NULL
            )
            """,
            # Messages are read back in the order they were produced (row id).
            "CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages(session_id, id)",
        ),
    ),
    Migration(
        2,
        "home channels per platform, handoff state machine",
        (
            # /sethome: where a platform's proactive work (handoffs) lands.
            """
            CREATE TABLE IF NOT EXISTS gateway_home_channels (
                platform TEXT PRIMARY KEY,
                chat_id TEXT NOT NULL,
                thread_id TEXT,
                chat_type TEXT,
                set_by TEXT,
                updated_at REAL NOT NULL
            )
            """,
            # pending -> claimed -> completed | failed; every transition is a
            # compare-and-set (UPDATE ... WHERE state = ?), so a late timeout can
            # never overwrite a claimed or completed row.
            """
            CREATE TABLE IF NOT EXISTS gateway_handoffs (
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
            )
            """,
            # At most one live handoff per session; failed/completed rows stay as
            # history and no longer block a retry.
            "CREATE UNIQUE INDEX IF NOT EXISTS idx_gateway_handoffs_live ON gateway_handoffs(session_id) "
            "WHERE state IN ('pending', 'claimed')",
        ),
    ),
    Migration(
        3,
        "where each session has lived: the keys it was ever bound to",
        (
            # The routing index keeps only a key's current session; /resume needs
            # to know which chats a session belongs to after the chat moved on
            # (/new, /handoff), so every binding is remembered here.
            """
            CREATE TABLE IF NOT EXISTS gateway_session_bindings (
                session_key TEXT NOT NULL,
                session_id TEXT NOT NULL,
                platform TEXT NOT NULL,
                user_id TEXT,
                first_bound_at REAL NOT NULL,
                PRIMARY KEY (session_key, session_id)
            ) WITHOUT ROWID
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_session_bindings_session ON gateway_session_bindings(session_id)",
            # What is known of the past: current bindings, and where replies of a session went.
            "INSERT OR IGNORE INTO gateway_session_bindings (session_key, session_id, platform, user_id, "
            "first_bound_at) SELECT session_key, session_id, platform, user_id, created_at FROM gateway_session_index",
            "INSERT OR IGNORE INTO gateway_session_bindings (session_key, session_id, platform, user_id, "
            "first_bound_at) SELECT session_key, session_id, platform, NULL, MIN(created_at) FROM gateway_outbound "
            "WHERE session_key IS NOT NULL AND session_id IS NOT NULL GROUP BY session_key, session_id, platform",
        ),
    ),
    Migration(4, "thread session keys in the reference's documented format (group:<chat>:<thread>)", (),
              rekey_threads),
    Migration(
        5,
        "what became of a message that became a turn: its stored question and its answer",
        (
            # A retried HTTP request (same Idempotency-Key) is answered from here,
            # also after a crash: the answer if it was stored, else the turn is
            # resumed on the stored question (never stored twice).
            "ALTER TABLE gateway_inbound_seen ADD COLUMN session_id TEXT",
            "ALTER TABLE gateway_inbound_seen ADD COLUMN question_id INTEGER",
            "ALTER TABLE gateway_inbound_seen ADD COLUMN answer TEXT",
        ),
    ),
    Migration(
        6,
        "the platform messages of a streamed answer, so that a restart can finish what a crash cut off",
        (
            # A JSON list of message ids; NULL for a reply sent whole. A streamed answer's row
            # exists from its first visible message on, as 'streaming' (no text yet).
            "ALTER TABLE gateway_outbound ADD COLUMN message_ids TEXT",
        ),
    ),
    Migration(
        7,
        "the files that came with messages: one row per attachment, its bytes in the media store",
        (
            # The message's content keeps the text (caption, transcript, a marker per file), so a
            # reader of the reference schema sees the whole conversation; the file itself is
            # media/ab/cd/<sha256>. No foreign key: a reference tool deleting a session must not
            # fail on our rows (they are found by attachments.delete_dangling instead).
            """
            CREATE TABLE IF NOT EXISTS gateway_attachments (
                id INTEGER PRIMARY KEY,
                message_id INTEGER NOT NULL,
                session_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                mime TEXT,
                name TEXT,
                size INTEGER NOT NULL,
                sha256 TEXT NOT NULL,
                description TEXT,
                created_at REAL NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_attachments_message ON gateway_attachments(message_id)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_attachments_session ON gateway_attachments(session_id)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_attachments_sha256 ON gateway_attachments(sha256)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_attachments_created ON gateway_attachments(created_at)",
        ),
    ),
)


def latest_version() -> int:
    """What ``schema_version`` holds: the reference's version, never the gateway's steps."""
    return REFERENCE_VERSION


def latest_gateway_version() -> int:
    return GATEWAY_MIGRATIONS[-1].version if GATEWAY_MIGRATIONS else 0
