"""Build a state.db exactly as reference version 1..10 of hermes-agent left it.

Everything here is derived from the version table of the reference
(session-storage.md, "Schema Version and Migrations"):

====  =======================================================================
v1    sessions + messages, external-content ``messages_fts(content)`` with the
      three ``messages_fts_*`` triggers, ``schema_version``
v2    messages.finish_reason
v3    sessions.title (not unique yet: duplicates are possible)
v4    partial unique index on sessions.title
v5    billing columns on sessions
v6    messages.reasoning, reasoning_details, codex_reasoning_items
v7    messages.reasoning_content
v8    sessions.api_call_count
v9    messages.codex_message_items
v10   external-content ``messages_fts_trigram`` (trigram tokenizer) with its
      own ``messages_fts_trigram_*`` triggers, backfilled from messages
====  =======================================================================

A database is built the way that version's ``SCHEMA_SQL`` would create it on a
fresh install, in WAL mode like the reference, and filled with data that was
valid for that version. Rows are written in two phases; for v10 the trigram
table arrives between them and is backfilled, as the v10 migration did, so both
the backfill and the triggers put rows into it.

The tests never trust these constants for the expected values: they read
every row back from the legacy file before upgrading it.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

OLDEST = 1
NEWEST = 10
VERSIONS = tuple(range(OLDEST, NEWEST + 1))

# (column, declaration, first reference version that has it)
SESSION_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("id", "TEXT PRIMARY KEY", 1),
    ("source", "TEXT NOT NULL", 1),
    ("user_id", "TEXT", 1),
    ("model", "TEXT", 1),
    ("model_config", "TEXT", 1),
    ("system_prompt", "TEXT", 1),
    ("parent_session_id", "TEXT", 1),
    ("started_at", "REAL NOT NULL", 1),
    ("ended_at", "REAL", 1),
    ("end_reason", "TEXT", 1),
    ("message_count", "INTEGER DEFAULT 0", 1),
    ("tool_call_count", "INTEGER DEFAULT 0", 1),
    ("input_tokens", "INTEGER DEFAULT 0", 1),
    ("output_tokens", "INTEGER DEFAULT 0", 1),
    ("cache_read_tokens", "INTEGER DEFAULT 0", 5),
    ("cache_write_tokens", "INTEGER DEFAULT 0", 5),
    ("reasoning_tokens", "INTEGER DEFAULT 0", 5),
    ("billing_provider", "TEXT", 5),
    ("billing_base_url", "TEXT", 5),
    ("billing_mode", "TEXT", 5),
    ("estimated_cost_usd", "REAL", 5),
    ("actual_cost_usd", "REAL", 5),
    ("cost_status", "TEXT", 5),
    ("cost_source", "TEXT", 5),
    ("pricing_version", "TEXT", 5),
    ("title", "TEXT", 3),
    ("api_call_count", "INTEGER DEFAULT 0", 8),
)

MESSAGE_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("id", "INTEGER PRIMARY KEY AUTOINCREMENT", 1),
    ("session_id", "TEXT NOT NULL REFERENCES sessions(id)", 1),
    ("role", "TEXT NOT NULL", 1),
    ("content", "TEXT", 1),
    ("tool_call_id", "TEXT", 1),
    ("tool_calls", "TEXT", 1),
    ("tool_name", "TEXT", 1),
    ("timestamp", "REAL NOT NULL", 1),
    ("token_count", "INTEGER", 1),
    ("finish_reason", "TEXT", 2),
    ("reasoning", "TEXT", 6),
    ("reasoning_content", "TEXT", 7),
    ("reasoning_details", "TEXT", 6),
    ("codex_reasoning_items", "TEXT", 6),
    ("codex_message_items", "TEXT", 9),
)

# What a column that a version did not have holds after the upgrade adds it.
V11_DEFAULTS: dict[str, Any] = {
    "cache_read_tokens": 0,
    "cache_write_tokens": 0,
    "reasoning_tokens": 0,
    "api_call_count": 0,
}


def session_columns(version: int) -> list[str]:
    return [name for name, _, since in SESSION_COLUMNS if since <= version]


def message_columns(version: int) -> list[str]:
    return [name for name, _, since in MESSAGE_COLUMNS if since <= version]


# ------------------------------------------------------------------ DDL


def _sessions_ddl(version: int) -> str:
    cols = [f"    {name} {decl}" for name, decl, since in SESSION_COLUMNS if since <= version]
    cols.append("    FOREIGN KEY (parent_session_id) REFERENCES sessions(id)")
    return "CREATE TABLE IF NOT EXISTS sessions (\n" + ",\n".join(cols) + "\n)"


def _messages_ddl(version: int) -> str:
    cols = [f"    {name} {decl}" for name, decl, since in MESSAGE_COLUMNS if since <= version]
    return "CREATE TABLE IF NOT EXISTS messages (\n" + ",\n".join(cols) + "\n)"


SCHEMA_VERSION_DDL = "CREATE TABLE IF NOT EXISTS schema_version (\n    version INTEGER NOT NULL\n)"

V1_INDEXES = (
    "CREATE INDEX IF NOT EXISTS idx_sessions_source ON sessions(source)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_parent ON sessions(parent_session_id)",
    "CREATE INDEX IF NOT EXISTS idx_sessions_started ON sessions(started_at DESC)",
    "CREATE INDEX IF NOT EXISTS idx_messages_session ON messages(session_id, timestamp)",
)

V4_TITLE_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_sessions_title_unique\n"
    "    ON sessions(title) WHERE title IS NOT NULL"
)

# Verbatim from the reference (session-storage.md, "Full-Text Search").
V1_FTS = (
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content,
    content=messages,
    content_rowid=id
)""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES('delete', old.id, old.content);
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
END""",
)

V10_TRIGRAM = (
    """CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts_trigram USING fts5(
    content,
    content=messages,
    content_rowid=id,
    tokenize='trigram'
)""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content)
        VALUES('delete', old.id, old.content);
END""",
    """CREATE TRIGGER IF NOT EXISTS messages_fts_trigram_update AFTER UPDATE ON messages BEGIN
    INSERT INTO messages_fts_trigram(messages_fts_trigram, rowid, content)
        VALUES('delete', old.id, old.content);
    INSERT INTO messages_fts_trigram(rowid, content) VALUES (new.id, new.content);
END""",
)

# The v10 migration's backfill of rows that existed before the table did.
V10_TRIGRAM_BACKFILL = "INSERT INTO messages_fts_trigram(rowid, content) SELECT id, content FROM messages"


def schema_statements(version: int) -> list[str]:
    """Every statement that reference version ``version`` ran to create its schema."""
    if version not in VERSIONS:
        raise ValueError(f"reference versions are {OLDEST}..{NEWEST}, not {version}")
    stmts = [SCHEMA_VERSION_DDL, _sessions_ddl(version), _messages_ddl(version), *V1_INDEXES]
    if version >= 4:
        stmts.append(V4_TITLE_INDEX)
    stmts.extend(V1_FTS)
    return stmts


# ------------------------------------------------------------------ data

# Words the tests search for after the upgrade. Each occurs in exactly one
# place, so a hit proves which column was indexed.
WORD_IN_CONTENT = "quokka"  # an assistant message's content
WORD_IN_TOOL_CALLS = "dmesg"  # only inside a tool_calls JSON argument
TOOL_NAME = "terminal"  # only as tool_name (and the function name in tool_calls)
CJK_SUBSTRING = "天気予報"  # 4 CJK characters inside a longer sentence
ACCENTED_WORD = "résumé"

DUPLICATE_TITLE = "Weekly planning"

T0 = 1_714_000_000.0  # 2024-04-24, plausible for any reference version

_TOOL_CALLS = [
    {
        "id": "call_01",
        "type": "function",
        "function": {"name": TOOL_NAME, "arguments": json.dumps({"command": f"free -h && {WORD_IN_TOOL_CALLS} | tail -5"})},
    }
]
_TOOL_CALLS_CJK = [
    {
        "id": "call_ja_1",
        "type": "function",
        "function": {"name": "web_search", "arguments": json.dumps({"query": "東京 明日 天気"}, ensure_ascii=False)},
    }
]


def _sessions(version: int) -> list[dict[str, Any]]:
    """Four sessions: one a compression child of another; titles from v3 on."""
    rows: list[dict[str, Any]] = [
        {
            "id": "20240424_231840_a1b2c3d4",
            "source": "telegram",
            "user_id": "tg:184467",
            "model": "anthropic/claude-sonnet-4.6",
            "model_config": json.dumps({"temperature": 0.7, "max_tokens": 4096}),
            "system_prompt": "You are Hermes, a helpful assistant. Today is 2024-04-24.",
            "parent_session_id": None,
            "started_at": T0,
            "ended_at": T0 + 600.5,
            "end_reason": "compression",
            "message_count": 5,
            "tool_call_count": 1,
            "input_tokens": 18234,
            "output_tokens": 912,
        },
        {
            "id": "20240424_233001_e5f60718",
            "source": "telegram",
            "user_id": "tg:184467",
            "model": "anthropic/claude-sonnet-4.6",
            "model_config": json.dumps({"temperature": 0.7, "max_tokens": 4096}),
            "system_prompt": "You are Hermes. [compressed context of the previous session]",
            "parent_session_id": "20240424_231840_a1b2c3d4",
            "started_at": T0 + 601.0,
            "ended_at": None,
            "end_reason": None,
            "message_count": 2,
            "tool_call_count": 0,
            "input_tokens": 2210,
            "output_tokens": 301,
        },
        {
            "id": "20240425_081512_9a8b7c",
            "source": "cli",
            "user_id": None,
            "model": "openai/gpt-4o",
            "model_config": None,
            "system_prompt": "あなたは親切なアシスタントです。",
            "parent_session_id": None,
            "started_at": T0 + 30_000.25,
            "ended_at": T0 + 30_420.0,
            "end_reason": "user_exit",
            "message_count": 4,
            "tool_call_count": 1,
            "input_tokens": 5120,
            "output_tokens": 733,
        },
        {
            "id": "20240426_190000_0badf00d",
            "source": "discord",
            "user_id": "dc:9931",
            "model": "nousresearch/hermes-4-405b",
            "model_config": None,
            "system_prompt": None,
            "parent_session_id": None,
            "started_at": T0 + 160_000.0,
            "ended_at": None,
            "end_reason": None,
            "message_count": 2,
            "tool_call_count": 0,
            "input_tokens": 800,
            "output_tokens": 120,
        },
    ]
    if version >= 3:
        if version == 3:
            # Before v4 nothing stopped two sessions from sharing a title.
            titles = ["Fix Docker Build", None, DUPLICATE_TITLE, DUPLICATE_TITLE]
        else:
            titles = ["Fix Docker Build", "Fix Docker Build #2", "東京の天気", DUPLICATE_TITLE]
        for row, title in zip(rows, titles, strict=True):
            row["title"] = title
    if version >= 5:
        rows[0].update(
            cache_read_tokens=12000,
            cache_write_tokens=3100,
            reasoning_tokens=0,
            billing_provider="openrouter",
            billing_base_url="https://openrouter.ai/api/v1",
            billing_mode="official_docs_snapshot",
            estimated_cost_usd=0.061734,
            actual_cost_usd=0.0618,
            cost_status="estimated",
            cost_source="provider_models_api",
            pricing_version="2024-04-01",
        )
        rows[2].update(cache_read_tokens=0, cache_write_tokens=0, reasoning_tokens=256,
                       billing_provider="openai", estimated_cost_usd=0.0201, cost_status="estimated")
    if version >= 8:
        rows[0]["api_call_count"] = 3
        rows[1]["api_call_count"] = 1
        rows[2]["api_call_count"] = 2
    return rows


def _messages(version: int) -> list[dict[str, Any]]:
    s1, s2, s3, s4 = (row["id"] for row in _sessions(1))
    t = T0
    rows: list[dict[str, Any]] = [
        # s1: a tool round trip
        {"session_id": s1, "role": "user", "content": "The docker build keeps failing with exit code 137. Why?",
         "timestamp": t + 1.0, "token_count": 14},
        {"session_id": s1, "role": "assistant", "content": None, "tool_calls": json.dumps(_TOOL_CALLS),
         "timestamp": t + 4.5, "token_count": 38, "finish_reason": "tool_calls",
         "reasoning": "Exit code 137 is SIGKILL; check memory first.",
         "reasoning_details": json.dumps([{"type": "reasoning.text", "text": "SIGKILL → OOM?"}], ensure_ascii=False),
         "codex_reasoning_items": json.dumps([{"id": "rs_1", "summary": []}]),
         "reasoning_content": "Exit code 137 is SIGKILL; check memory first."},
        {"session_id": s1, "role": "tool", "content": "              total  used  free\nMem:  7.7Gi  7.5Gi  120Mi\n"
         "[  812.4] Out of memory: Killed process 4211 (cc1plus)", "tool_call_id": "call_01",
         "tool_name": TOOL_NAME, "timestamp": t + 6.0, "token_count": 61},
        {"session_id": s1, "role": "assistant",
         "content": f"The kernel killed the compiler: the build ran out of memory. Lower the parallelism "
                    f"(`make -j2`) or give the VM more RAM. ({WORD_IN_CONTENT} says hi)",
         "timestamp": t + 9.25, "token_count": 42, "finish_reason": "stop",
         "codex_message_items": json.dumps([{"id": "msg_1", "phase": "final_answer"}])},
        {"session_id": s1, "role": "user", "content": "Thanks!", "timestamp": t + 30.0, "token_count": 2},
        # s2: the compression child, non-ASCII Latin text
        {"session_id": s2, "role": "user",
         "content": f"Continue with my {ACCENTED_WORD}: café, naïve, Zürich — what next?",
         "timestamp": t + 602.0, "token_count": 17},
        {"session_id": s2, "role": "assistant", "content": "Next: tailor the summary to the Zürich role. ✅",
         "timestamp": t + 605.0, "token_count": 12, "finish_reason": "stop"},
        # s3: CJK with a tool call
        {"session_id": s3, "role": "user", "content": f"東京の明日の{CJK_SUBSTRING}を教えてください。",
         "timestamp": t + 30_001.0, "token_count": 20},
        {"session_id": s3, "role": "assistant", "content": "", "tool_calls": json.dumps(_TOOL_CALLS_CJK, ensure_ascii=False),
         "timestamp": t + 30_003.0, "token_count": 25, "finish_reason": "tool_calls"},
        {"session_id": s3, "role": "tool", "content": "東京: 晴れ 最高気温 24°C / 서울: 흐림", "tool_call_id": "call_ja_1",
         "tool_name": "web_search", "timestamp": t + 30_004.0, "token_count": 18},
        {"session_id": s3, "role": "assistant", "content": "明日の東京は晴れ、最高気温は24度の予報です。",
         "timestamp": t + 30_006.0, "token_count": 22, "finish_reason": "stop"},
        # s4: emoji, plain chat
        {"session_id": s4, "role": "user", "content": "Plan my week 🗓️ — gym Mon/Wed/Fri, dentist Thu 10:00.",
         "timestamp": t + 160_001.0, "token_count": 19},
        {"session_id": s4, "role": "assistant", "content": "Mon: gym 🏋️\nTue: deep work\nWed: gym\nThu: dentist 10:00\nFri: gym",
         "timestamp": t + 160_004.0, "token_count": 30, "finish_reason": "stop"},
    ]
    allowed = set(message_columns(version))
    return [{k: v for k, v in row.items() if k in allowed} for row in rows]


def _insert(conn: sqlite3.Connection, table: str, row: dict[str, Any]) -> None:
    cols = list(row)
    conn.execute(
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
        [row[c] for c in cols],
    )


def build_legacy_db(path: Path | str, version: int) -> Path:
    """Create ``path`` as reference version ``version`` (1..10) left it, with data."""
    path = Path(path)
    if version not in VERSIONS:
        raise ValueError(f"reference versions are {OLDEST}..{NEWEST}, not {version}")
    if path.exists():
        raise FileExistsError(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    sessions = _sessions(version)
    messages = _messages(version)
    # The first half of the history predates v10 (backfilled), the rest is
    # written by that version's triggers.
    first, rest = messages[:7], messages[7:]
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("BEGIN")
        for stmt in schema_statements(version):
            conn.execute(stmt)
        conn.execute("INSERT INTO schema_version(version) VALUES (?)", (version,))
        for row in sessions:
            _insert(conn, "sessions", row)
        for row in first:
            _insert(conn, "messages", row)
        conn.execute("COMMIT")
        conn.execute("BEGIN")
        if version >= 10:
            for stmt in V10_TRIGRAM:
                conn.execute(stmt)
            conn.execute(V10_TRIGRAM_BACKFILL)
        for row in rest:
            _insert(conn, "messages", row)
        conn.execute("COMMIT")
        _self_check(conn, version, n_messages=len(messages))
    finally:
        conn.close()  # last connection: checkpoints and removes the WAL
    return path


def _self_check(conn: sqlite3.Connection, version: int, *, n_messages: int) -> None:
    """The legacy file must really be what that version left, or the tests prove nothing."""
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert [r[1] for r in conn.execute("PRAGMA table_info(sessions)")] == session_columns(version)
    assert [r[1] for r in conn.execute("PRAGMA table_info(messages)")] == message_columns(version)
    tables = ["messages_fts", *(["messages_fts_trigram"] if version >= 10 else [])]
    for table in tables:
        conn.execute(f"INSERT INTO {table}({table}) VALUES ('integrity-check')")
        # External content: the index holds one entry per message row.
        (n,) = conn.execute(f"SELECT COUNT(*) FROM {table}_docsize").fetchone()
        assert n == n_messages, (table, n)
    has_trigram = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages_fts_trigram'").fetchone()
    assert (has_trigram is not None) == (version >= 10)
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(version,)]
