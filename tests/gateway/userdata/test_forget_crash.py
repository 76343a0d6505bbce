"""A forget killed with SIGKILL (a real child process, ``_forget_child.py``): nothing is half-deleted.

Killed inside its transaction, it deleted nothing (every row of hers is there, FTS included, and no
request row); killed after its commit and before the files, the next daemon start finishes it
(``Forgetter.resume``): her files leave the media store, her memory profile is cleared (she is an
owner here), the request is done and names her no more.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from storage import MediaStore, StateStore
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway
from tests.storage._procs import spawn
from tests.storage._support import integrity_check
from tests.storage._userdata_fixture import (
    ALICE,
    ALICE_SHA,
    ALICE_WORD,
    BOB_SHA,
    BOB_WORD,
    fts_hits,
    populate,
    rows_naming,
)

CHILD = Path(__file__).with_name("_forget_child.py")
#: enough of her messages that the transaction has real work in it
MESSAGES = 3000


async def _home(home: Path) -> MediaStore:
    await asyncio.to_thread((home / "memories").mkdir, parents=True)
    await asyncio.to_thread((home / "memories" / "USER.md").write_text, "Alice likes tea\n§\nAlice is in Oslo")
    async with StateStore(home / "state.db") as store:
        await store.write(lambda c: populate(c, alice_dm_messages=MESSAGES))
        await store.catch_up_index()  # the checks below count index entries
    blobs = MediaStore(home / "media")
    for data in (b"alice's picture", b"bob's picture"):
        await blobs.put_bytes(data)
    return blobs


def _count(db: Path, sql: str) -> int:
    conn = sqlite3.connect(str(db))
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


async def test_killed_inside_the_transaction_deletes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "h"
    await _home(home)
    db = home / "state.db"
    conn = sqlite3.connect(str(db))
    before = _count(db, "SELECT COUNT(*) FROM messages"), fts_hits(conn, ALICE_WORD)
    conn.close()
    async with spawn(CHILD, str(home), f"telegram:{ALICE}", "in-transaction", log_dir=tmp_path) as child:
        await child.expect("DELETED-NOT-COMMITTED", within=120)
        await child.kill()
    assert integrity_check(db) == "ok"
    conn = sqlite3.connect(str(db))
    try:
        assert (_count(db, "SELECT COUNT(*) FROM messages"), fts_hits(conn, ALICE_WORD)) == before
        assert _count(db, "SELECT COUNT(*) FROM gateway_forget_requests") == 0
        assert _count(db, "SELECT COUNT(*) FROM gateway_cron_jobs") == 2
    finally:
        conn.close()


async def test_killed_after_the_commit_is_finished_at_the_next_start(tmp_path: Path,
                                                                       fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "h"
    blobs = await _home(home)
    # The fixture's rows name this digest for her picture; the store holds bytes under their own digest,
    # so the rows are pointed at what the store really has.
    stored = {b.sha256 for b in await blobs.list_blobs()}
    conn = sqlite3.connect(str(home / "state.db"))
    alice_blob, bob_blob = sorted(stored)
    conn.execute("UPDATE gateway_attachments SET sha256 = ? WHERE sha256 = ?", (alice_blob, ALICE_SHA))
    conn.execute("UPDATE gateway_attachments SET sha256 = ? WHERE sha256 = ?", (bob_blob, BOB_SHA))
    conn.commit()
    conn.close()
    async with spawn(CHILD, str(home), f"telegram:{ALICE}", "after-commit", log_dir=tmp_path) as child:
        line = await child.expect("COMMITTED", within=120)
        await child.kill()
    request_id = int(line.split()[1])
    db = home / "state.db"
    assert integrity_check(db) == "ok"
    conn = sqlite3.connect(str(db))
    try:
        assert fts_hits(conn, ALICE_WORD) == 0 and fts_hits(conn, BOB_WORD) == 4
        assert conn.execute("SELECT id, state FROM gateway_forget_requests").fetchall() == [(request_id, "files")]
    finally:
        conn.close()
    assert blobs.path_for(alice_blob).exists()  # the files were not dealt with before the kill

    async with run_gateway(home, fake_openai.base_url, env={"TESTCHAT_ALLOWED_USERS": "u1"},
                           config={"auth": {"owners": [f"telegram:{ALICE}"]}}, chat=ChatAdapter()):
        pass  # started (which resumes the forget) and stopped
    conn = sqlite3.connect(str(db))
    try:
        assert conn.execute("SELECT state, user_id FROM gateway_forget_requests").fetchall() == [("done", None)]
        assert rows_naming(conn, ALICE) == []
    finally:
        conn.close()
    assert not blobs.path_for(alice_blob).exists() and blobs.path_for(bob_blob).exists()
    assert (await asyncio.to_thread((home / "memories" / "USER.md").read_text)).strip() == ""
