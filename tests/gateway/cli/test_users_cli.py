"""``hermes-gateway users export|forget`` as an operator runs them (the console script, a real
state.db): offline on the file, and through the running daemon's control socket."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from pathlib import Path

from storage import StateStore
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway._console import ROOT, SCRIPT, TIMEOUT, Result, console_env
from tests.gateway.conftest import run_gateway
from tests.storage._userdata_fixture import ALICE, ALICE_WORD, BOB_WORD, fts_hits, populate, rows_naming


def users(home: Path, *args: str) -> Result:
    proc = subprocess.run([str(SCRIPT), "users", *args], env=console_env(home), cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT)
    return Result(proc.returncode, proc.stdout, proc.stderr)


async def _populated(home: Path) -> None:
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    async with StateStore(home / "state.db") as store:
        await store.write(populate)
        await store.catch_up_index()  # the checks below count index entries


async def test_export_and_forget_without_a_daemon(gateway_home: Path) -> None:
    await _populated(gateway_home)
    out = gateway_home.parent / "alice.json"
    r = await asyncio.to_thread(users, gateway_home, "export", f"telegram:{ALICE}", "--out", str(out))
    assert r.code == 0, r.err
    data = json.loads(out.read_text())
    assert out.stat().st_mode & 0o777 == 0o600
    assert {s["id"]: s["shared"] for s in data["sessions"]} == {
        "s-alice-dm": False, "s-alice-dm-2": False, "s-alice-group": False, "s-topic": True}
    assert BOB_WORD not in out.read_text() and [j["name"] for j in data["scheduled_jobs"]] == ["daily"]
    again = await asyncio.to_thread(users, gateway_home, "export", f"telegram:{ALICE}", "--out", str(out))
    assert again.code == 1 and "exists already" in again.err
    to_stdout = await asyncio.to_thread(users, gateway_home, "export", f"telegram:{ALICE}")
    assert json.loads(to_stdout.out) == data | {"exported_at": json.loads(to_stdout.out)["exported_at"]}

    bad = await asyncio.to_thread(users, gateway_home, "forget", "alice", "--yes")
    assert bad.code == 1 and "PLATFORM:ID" in bad.err
    unasked = await asyncio.to_thread(users, gateway_home, "forget", f"telegram:{ALICE}")
    assert unasked.code == 1 and "not a terminal" in unasked.err
    r = await asyncio.to_thread(users, gateway_home, "forget", f"telegram:{ALICE}", "--yes")
    assert r.code == 0, r.err
    assert "sessions deleted: 3" in r.out and "messages replaced by a marker in shared sessions: 1" in r.out
    conn = sqlite3.connect(str(gateway_home / "state.db"))
    try:
        assert fts_hits(conn, ALICE_WORD) == 0 and rows_naming(conn, ALICE) == []
        assert fts_hits(conn, BOB_WORD) == 4
    finally:
        conn.close()


async def test_forget_goes_through_the_running_daemon(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    await _populated(gateway_home)
    async with run_gateway(gateway_home, fake_openai.base_url, env={"TESTCHAT_ALLOWED_USERS": "u1"},
                           chat=ChatAdapter()) as run:
        proc = await asyncio.create_subprocess_exec(
            str(SCRIPT), "users", "forget", f"telegram:{ALICE}", "--yes", env=console_env(gateway_home), cwd=ROOT,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
        assert proc.returncode == 0, err.decode()
        assert "scheduled jobs: 1" in out.decode()
        assert run.gateway.services is not None
        await run.gateway.services.store.catch_up_index()
        left = await run.gateway.services.store.read(lambda c: fts_hits(c, ALICE_WORD))
        assert left == 0
