"""Helpers of the contract tests of the people families (cron, background, pairing, userdata,
forget): rows of other families written with plain SQL (those families' PostgreSQL ports merge
at the same time), and the PostgreSQL server started before any event loop runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from storage import CronJobRow

from .conftest import Db


@pytest.fixture(autouse=True)
def _pg_server_before_the_loop(request: pytest.FixtureRequest) -> None:
    """``db`` asks for ``pg_url`` inside the running loop; the session's server is started with
    ``asyncio.run`` (its migrated template), which cannot run there: start it first, here."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")


def sql(db: Db, conn: Any, statement: str, params: Sequence[Any] = ()) -> Any:
    """``statement`` written with ``?`` marks, run on either backend's connection (its cursor)."""
    if db.name == "postgresql":
        statement = statement.replace("?", "%s")
    return conn.execute(statement, tuple(params))


async def rows(db: Db, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of a query, as tuples."""
    return await db.read(lambda c: [tuple(r) for r in sql(db, c, statement, params).fetchall()])


async def one(db: Db, statement: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row of a query."""
    found = await rows(db, statement, params)
    return found[0][0] if found else None


# --- two people's history, written with plain SQL ------------------------------------------
# alice (telegram 100) and bob (telegram 200), each with a DM; alice's own session in group -5;
# a shared topic (77) of that group where both talk; a file each; a job each; dedupe and ledger
# rows: the history of tests/storage/_userdata_fixture.py, row for row, on either backend.

ALICE, BOB = "100", "200"
ALICE_WORD, BOB_WORD = "zorbalicious", "quaxbobbly"
ALICE_SHA, BOB_SHA, SHARED_SHA, EXPORT_SHA = "a" * 64, "b" * 64, "c" * 64, "e" * 64
DM_A, DM_B = "agent:main:telegram:dm:100", "agent:main:telegram:dm:200"
GROUP_A = "agent:main:telegram:group:-5:100"
TOPIC = "agent:main:telegram:group:-5:77"
T0 = 1_700_000_000.0


class History:
    """Writes rows in the caller's transaction; ``tick`` keeps times distinct and ordered."""

    def __init__(self, db: Db, conn: Any) -> None:
        self.db, self.conn, self.now = db, conn, T0

    def tick(self) -> float:
        self.now += 1.0
        return self.now

    def x(self, statement: str, *params: Any) -> Any:
        return sql(self.db, self.conn, statement, params)

    def session(self, sid: str, user: str | None, *, parent: str | None = None) -> None:
        self.x("INSERT INTO sessions (id, source, user_id, parent_session_id, started_at) VALUES (?, ?, ?, ?, ?)",
               sid, "telegram", user, parent, self.tick())

    def bind(self, key: str, sid: str, user: str | None, chat: str | None, chat_type: str | None,
             thread: str | None = None) -> None:
        now = self.tick()
        self.x("INSERT INTO gateway_session_index (session_key, session_id, platform, chat_id, chat_type, thread_id, "
               "user_id, created_at, updated_at) VALUES (?, ?, 'telegram', ?, ?, ?, ?, ?, ?) ON CONFLICT (session_key) "
               "DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at",
               key, sid, chat, chat_type, thread, user, now, now)
        self.x("INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, first_bound_at) "
               "VALUES (?, ?, 'telegram', ?, ?) ON CONFLICT DO NOTHING", key, sid, user, now)

    def message(self, sid: str, role: str, text: str) -> int:
        row = self.x("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, ?, ?, ?) RETURNING id",
                     sid, role, text, self.tick()).fetchone()
        self.x("UPDATE sessions SET message_count = message_count + 1 WHERE id = ?", sid)
        return int(row[0])

    def say(self, sid: str, user: str | None, text: str, *, n: int = 0) -> int:
        mid = self.message(sid, "user" if user else "assistant", text)
        if user:
            self.db.m.userdata.record_sender(self.conn, sid, "telegram", user)
            self.x("INSERT INTO gateway_inbound_seen (platform, delivery_key, seen_at, session_id, question_id, "
                   "user_id) VALUES ('telegram', ?, ?, ?, ?, ?)", f"chat:{sid}:{n}:{mid}", self.now, sid, mid, user)
        return mid

    def file(self, mid: int, sid: str, kind: str, mime: str, name: str, sha: str) -> None:
        self.x("INSERT INTO gateway_attachments (message_id, session_id, kind, mime, name, size, sha256, created_at) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", mid, sid, kind, mime, name, 10, sha, self.tick())

    def ledger(self, key: str | None, sid: str | None, chat: str, text: str, files: str | None = None) -> None:
        self.x("INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, text, created_at, files) "
               "VALUES (?, ?, 'telegram', ?, ?, ?, ?)", key, sid, chat, text, self.tick(), files)


def job_of(owner: str, name: str) -> CronJobRow:
    return CronJobRow(f"job-{owner}-{name}", name, f"remind {ALICE_WORD if owner == ALICE else BOB_WORD}",
                      "every 1h", "every", "origin", None, "once", "telegram", owner, None, owner,
                      f"agent:main:telegram:dm:{owner}", "dm", False, T0 + 3600, False, None, None, 0, T0, T0)


def populate(db: Db, conn: Any) -> None:
    """The two people's history (in the caller's transaction)."""
    h = History(db, conn)
    h.session("s-alice-dm", ALICE)
    h.bind(DM_A, "s-alice-dm", ALICE, ALICE, "dm")
    for i in range(3):
        mid = h.say("s-alice-dm", ALICE, f"{ALICE_WORD} note {i} about my plans", n=i)
        if i == 0:
            h.file(mid, "s-alice-dm", "image", "image/png", "me.png", ALICE_SHA)
        h.say("s-alice-dm", None, f"answer {i}")
    h.x("UPDATE sessions SET title = 'alice plans' WHERE id = 's-alice-dm'")
    # Compressed: a continuation (its summary names her words) bound to her DM without a message.
    h.session("s-alice-dm-2", ALICE, parent="s-alice-dm")
    h.message("s-alice-dm-2", "user", f"[summary] she wrote {ALICE_WORD}")
    h.x("UPDATE sessions SET ended_at = ?, end_reason = 'compression' WHERE id = 's-alice-dm'", h.tick())
    h.bind(DM_A, "s-alice-dm-2", None, None, None)
    h.session("s-alice-group", ALICE)
    h.bind(GROUP_A, "s-alice-group", ALICE, "-5", "group")
    h.say("s-alice-group", ALICE, f"{ALICE_WORD} in the group, my own session")
    h.say("s-alice-group", None, "sure")
    h.session("s-bob-dm", BOB)
    h.bind(DM_B, "s-bob-dm", BOB, BOB, "dm")
    mid = h.say("s-bob-dm", BOB, f"{BOB_WORD} hello")
    h.file(mid, "s-bob-dm", "image", "image/png", "bob.png", BOB_SHA)
    h.say("s-bob-dm", None, "hi bob")
    # The shared topic: bound first by alice, both talk in it; the same file sent by both.
    h.session("s-topic", ALICE)
    h.bind(TOPIC, "s-topic", ALICE, "-5", "group", thread="77")
    first = h.say("s-topic", ALICE, f"{ALICE_WORD} asks the room")
    h.file(first, "s-topic", "document", "text/plain", "a.txt", SHARED_SHA)
    h.say("s-topic", None, "room answer one")
    second = h.say("s-topic", BOB, f"{BOB_WORD} replies in the room")
    h.file(second, "s-topic", "document", "text/plain", "b.txt", SHARED_SHA)
    h.say("s-topic", None, "room answer two")
    h.x("INSERT INTO gateway_approvals_always (session_id, pattern, tool, approved_by, created_at) "
        "VALUES ('s-topic', 'rm -rf build', 'terminal', ?, ?)", ALICE, h.tick())
    db.m.cron.insert(conn, job_of(ALICE, "daily"))
    db.m.cron.insert(conn, job_of(BOB, "daily"))
    # An export already sent to alice's DM (its file in the ledger), and a reply to bob.
    h.ledger(None, None, ALICE, "Your data", json.dumps([{"sha256": EXPORT_SHA, "name": "export.json",
                                                          "mime": "application/json", "kind": "document",
                                                          "size": 5}]))
    h.ledger(DM_B, "s-bob-dm", BOB, "hi bob")


def rows_naming(db: Db, conn: Any, value: str, *, inside: bool = False) -> list[str]:
    """Every table.column holding ``value`` in a cell (exactly; ``inside``: anywhere in its text):
    where a person's id or words could hide. SQLite's FTS tables are not counted here."""
    if db.name == "sqlite":
        tables = [str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'messages_fts%' "
            "AND name NOT LIKE 'sqlite_%'")]
        columns = [(t, str(r[1])) for t in tables for r in conn.execute(f"PRAGMA table_info({t})")]
    else:
        columns = [(str(r[0]), str(r[1])) for r in conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public' "
            "ORDER BY table_name, ordinal_position")]
    found = []
    for table, col in sorted(columns):
        n = sql(db, conn, f"SELECT COUNT(*) FROM {table} WHERE CAST({col} AS TEXT) = ? "
                          f"OR (? AND CAST({col} AS TEXT) LIKE ?)", (value, inside, f"%{value}%")).fetchone()[0]
        if n:
            found.append(f"{table}.{col}")
    return found
