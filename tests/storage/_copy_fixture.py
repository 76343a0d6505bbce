"""A state.db for the copy tests, written through the storage functions the gateway uses, and a way
to read every copied row of a SQLite file or a PostgreSQL database for comparison."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import psycopg

from storage import StateStore, WriterSettings, home_channels, ops, pairing, settings
from storage.copy import SKIPPED_META_KEYS
from tests.storage._userdata_fixture import populate

UNICODE = "héllo wörld — 日本語のテキスト 🚀 emoji, Ωmega"
CJK_WORD = "日本語"
LARGE = "large-content " + "x" * 400_000 + " tail-marker-zq"
#: the tables every copy moves (the gateway's and the reference's; bookkeeping left out)
#: gateway_parked: a copy refuses a source with any row, so it is empty on both sides (SQLite only)
NOT_COMPARED = {"schema_version", "hermes_copy_progress", "hermes_migrations", "gateway_parked"}


def build(conn: sqlite3.Connection, *, extra_sessions: int = 0, messages_each: int = 0) -> None:
    """The userdata history, a three-deep lineage whose child ids sort before their parents,
    unicode, NULLs, a large message, tool calls, a deleted last message, and more gateway rows."""
    populate(conn)
    now = time.time()
    ops.create_session(conn, "z-root", "cli", model="m1", system_prompt=None)
    ops.create_session(conn, "m-middle", "cli", parent_session_id="z-root")
    ops.create_session(conn, "a-leaf", "cli", parent_session_id="m-middle")
    ops.append_message(conn, "z-root", "user", UNICODE)
    ops.append_message(conn, "z-root", "assistant", None,
                       tool_calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}])
    ops.append_message(conn, "z-root", "tool", '{"ok": true}', tool_name="f", tool_call_id="c1")
    ops.append_message(conn, "m-middle", "user", LARGE)
    ops.append_message(conn, "a-leaf", "user", "leaf words", token_count=None, finish_reason=None)
    ops.set_session_title(conn, "z-root", "Ünïcode title")
    for i in range(extra_sessions):
        ops.create_session(conn, f"bulk-{i:04d}", "telegram", user_id=str(i))
        for j in range(messages_each):
            ops.append_message(conn, f"bulk-{i:04d}", "user" if j % 2 == 0 else "assistant", f"bulk {i} {j} text")
    gone = ops.append_message(conn, "a-leaf", "assistant", "deleted again")
    conn.execute("DELETE FROM messages WHERE id = ?", (gone,))  # AUTOINCREMENT: this id is never reused
    pairing.add_code(conn, platform="telegram", account_id="bot", user_id="300", user_name="Çarol",
                     chat_id="300", code_hash=bytes(range(32)), now=now, ttl=600.0)
    pairing.allow(conn, platform="telegram", account_id="bot", user_id="300", user_name=None,
                  approved_by="100", now=now)
    pairing.record_owner(conn, platform="telegram", account_id="bot", user_id="100", now=now)
    home_channels.put(conn, "telegram", chat_id="100", thread_id=None, chat_type="dm", set_by="100", now=now)
    settings.set_session(conn, "z-root", "model", "m2", now=now)
    settings.set_global(conn, "voice", "on", updated_by=None, now=now)
    ops.set_meta(conn, "last_auto_prune", repr(now))


async def make_state_db(path: Path, **kwargs: Any) -> None:
    async with StateStore(path, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        await store.write(lambda conn: build(conn, **kwargs))


def _meta_ok(table: str, row: dict[str, Any]) -> bool:
    return table != "state_meta" or row["key"] not in SKIPPED_META_KEYS


def sqlite_rows(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every copied table's rows, sorted, as dicts."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        names = [str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND name NOT LIKE 'messages_fts%'")]
        out: dict[str, list[dict[str, Any]]] = {}
        for name in names:
            if name in NOT_COMPARED:
                continue
            rows = [dict(r) for r in conn.execute(f'SELECT * FROM "{name}"')]
            out[name] = sorted((r for r in rows if _meta_ok(name, r)), key=repr)
        return out
    finally:
        conn.close()


def pg_rows(url: str, tables: list[str]) -> dict[str, list[dict[str, Any]]]:
    with psycopg.connect(url) as conn:
        out: dict[str, list[dict[str, Any]]] = {}
        for name in tables:
            cur = conn.execute(f'SELECT * FROM "{name}"')
            cols = [d.name for d in cur.description or []]
            # generated columns (search's tsvector, migration 0003) are derived, not copied
            generated = {str(g[0]) for g in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attgenerated <> ''", (name,))}
            rows = [{c: v for c, v in zip(cols, r, strict=True) if c not in generated} for r in cur.fetchall()]
            out[name] = sorted((r for r in rows if _meta_ok(name, r)), key=repr)
        return out


def sqlite_sequence(path: Path, table: str) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        return int(row[0]) if row else 0
    finally:
        conn.close()
