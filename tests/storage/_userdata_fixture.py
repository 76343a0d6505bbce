"""A state.db history of two people, written through the storage functions the gateway uses:
alice (telegram 100) and bob (telegram 200), each with a DM; alice's own session in group -5;
a shared topic (77) of that group where both talk; a file each; a job each; dedupe and ledger rows.

Every word alice wrote carries ``ALICE_WORD`` (and bob's ``BOB_WORD``), so a test can ask the FTS
tables whether any of hers is left. Used by the storage tests, the crash child and the bench.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

from storage import (
    CronJobRow,
    LedgerFile,
    approvals,
    attachments,
    bindings,
    cron,
    fts_index,
    inbound,
    ops,
    outbound,
    userdata,
)

ALICE, BOB = "100", "200"
ALICE_WORD, BOB_WORD = "zorbalicious", "quaxbobbly"
ALICE_SHA, BOB_SHA, SHARED_SHA, EXPORT_SHA = "a" * 64, "b" * 64, "c" * 64, "e" * 64
DM_A, DM_B = "agent:main:telegram:dm:100", "agent:main:telegram:dm:200"
GROUP_A = "agent:main:telegram:group:-5:100"
TOPIC = "agent:main:telegram:group:-5:77"


def _say(conn: sqlite3.Connection, session: str, user: str | None, text: str, *, n: int = 0) -> int:
    mid = ops.append_message(conn, session, "user" if user else "assistant", text)
    if user:
        userdata.record_sender(conn, session, "telegram", user)
        inbound.record(conn, "telegram", f"chat:{session}:{n}:{mid}", now=time.time(), session_id=session,
                       user_id=user)
    return mid


def _session(conn: sqlite3.Connection, key: str, sid: str, user: str, chat: str, chat_type: str,
             thread: str | None = None) -> None:
    ops.create_session(conn, sid, "telegram", user_id=user)
    bindings.bind(conn, key, sid, platform="telegram", chat_id=chat, chat_type=chat_type, thread_id=thread,
                  user_id=user, now=time.time())


def _job(owner: str, name: str) -> CronJobRow:
    now = time.time()
    return CronJobRow(f"job-{owner}-{name}", name, f"remind {ALICE_WORD if owner == ALICE else BOB_WORD}",
                      "every 1h", "every", "origin", None, "once", "telegram", owner, None, owner,
                      f"agent:main:telegram:dm:{owner}", "dm", False, now + 3600, False, None, None, 0, now, now)


def populate(conn: sqlite3.Connection, *, alice_dm_messages: int = 3) -> None:
    """Write the history (in the caller's transaction)."""
    _session(conn, DM_A, "s-alice-dm", ALICE, ALICE, "dm")
    for i in range(alice_dm_messages):
        mid = _say(conn, "s-alice-dm", ALICE, f"{ALICE_WORD} note {i} about my plans", n=i)
        if i == 0:
            attachments.add(conn, message_id=mid, session_id="s-alice-dm", kind="image", mime="image/png",
                            name="me.png", size=10, sha256=ALICE_SHA)
        _say(conn, "s-alice-dm", None, f"answer {i}")
    ops.set_session_title(conn, "s-alice-dm", "alice plans")
    # Compressed: a continuation (its summary names her words) bound to her DM without a message.
    ops.create_session(conn, "s-alice-dm-2", "telegram", user_id=ALICE, parent_session_id="s-alice-dm")
    ops.append_message(conn, "s-alice-dm-2", "user", f"[summary] she wrote {ALICE_WORD}")
    ops.end_session(conn, "s-alice-dm", "compression")
    bindings.bind(conn, DM_A, "s-alice-dm-2", platform="telegram", chat_id=None, chat_type=None, thread_id=None,
                  user_id=None, now=time.time())
    _session(conn, GROUP_A, "s-alice-group", ALICE, "-5", "group")
    _say(conn, "s-alice-group", ALICE, f"{ALICE_WORD} in the group, my own session")
    _say(conn, "s-alice-group", None, "sure")
    _session(conn, DM_B, "s-bob-dm", BOB, BOB, "dm")
    mid = _say(conn, "s-bob-dm", BOB, f"{BOB_WORD} hello")
    attachments.add(conn, message_id=mid, session_id="s-bob-dm", kind="image", mime="image/png", name="bob.png",
                    size=10, sha256=BOB_SHA)
    _say(conn, "s-bob-dm", None, "hi bob")
    # The shared topic: bound first by alice, both talk in it; the same file sent by both.
    _session(conn, TOPIC, "s-topic", ALICE, "-5", "group", thread="77")
    first = _say(conn, "s-topic", ALICE, f"{ALICE_WORD} asks the room")
    attachments.add(conn, message_id=first, session_id="s-topic", kind="document", mime="text/plain",
                    name="a.txt", size=3, sha256=SHARED_SHA)
    _say(conn, "s-topic", None, "room answer one")
    second = _say(conn, "s-topic", BOB, f"{BOB_WORD} replies in the room")
    attachments.add(conn, message_id=second, session_id="s-topic", kind="document", mime="text/plain",
                    name="b.txt", size=3, sha256=SHARED_SHA)
    _say(conn, "s-topic", None, "room answer two")
    approvals.remember(conn, "s-topic", "rm -rf build", tool="terminal", approved_by=ALICE, now=time.time())
    cron.insert(conn, _job(ALICE, "daily"))
    cron.insert(conn, _job(BOB, "daily"))
    now = time.time()
    # An export already sent to alice's DM (its file in the ledger), and a reply to bob.
    outbound.record(conn, session_key=None, session_id=None, platform="telegram", chat_id=ALICE, thread_id=None,
                    reply_to=None, text="Your data", now=now,
                    files=(LedgerFile(EXPORT_SHA, "export.json", "application/json", "document", 5),))
    outbound.record(conn, session_key=DM_B, session_id="s-bob-dm", platform="telegram", chat_id=BOB,
                    thread_id=None, reply_to=None, text="hi bob", now=now)


async def wait_indexed(db: Path) -> None:
    """Until the daemon's indexer has every message of ``db`` in the FTS tables."""
    deadline = time.monotonic() + 15
    while True:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            left = fts_index.pending(conn)
        finally:
            conn.close()
        if not left:
            return
        assert time.monotonic() < deadline, f"{left} messages still wait to be indexed"
        await asyncio.sleep(0.02)


def fts_hits(conn: sqlite3.Connection, word: str) -> int:
    """Rows of both FTS tables that hold ``word``. Messages commit unindexed (``storage.fts_index``):
    wait for the indexer first (``wait_indexed``, ``StateStore.catch_up_index``), so that a row
    missing here was deleted, not yet to come."""
    assert not fts_index.pending(conn), "messages wait to be indexed: wait_indexed() first"
    n = conn.execute("SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?", (word,)).fetchone()[0]
    n += conn.execute("SELECT COUNT(*) FROM messages_fts_trigram WHERE messages_fts_trigram MATCH ?",
                      (f'"{word}"',)).fetchone()[0]
    return int(n)


def rows_naming(conn: sqlite3.Connection, value: str, *, inside: bool = False) -> list[str]:
    """Every table.column of the gateway's and the reference's tables holding ``value`` in a cell
    (exactly; ``inside``: anywhere in its text): where a person's id or words could hide."""
    found = []
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'messages_fts%' "
        "AND name NOT LIKE 'sqlite_%'")]
    for table in tables:
        for col in [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]:
            n = conn.execute(f"SELECT COUNT(*) FROM {table} WHERE CAST({col} AS TEXT) = ? "
                             f"OR (? AND CAST({col} AS TEXT) LIKE ?)", (value, inside, f"%{value}%")).fetchone()[0]
            if n:
                found.append(f"{table}.{col}")
    return found
