"""SIGTERM at start, idle and mid-turn: the daemon as a real process, exit codes as DESIGN.md says (0)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
from pathlib import Path

import httpx

from tests.fakes.openai_server import FakeOpenAI

from ._proc import ask, db_rows, free_port, run_daemon, write_home


async def _wait_model_called(fake: FakeOpenAI, timeout: float = 30.0) -> None:
    async def called() -> None:
        while not fake.chat_requests:
            await asyncio.sleep(0.02)

    await asyncio.wait_for(called(), timeout)


async def test_sigterm_during_start_up_exits_0_with_a_sound_db(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url)
    with run_daemon(home, port) as d:
        # The first log line of Gateway.run: state.db, adapters and HTTP are not up yet.
        await asyncio.to_thread(d.wait_event, "gateway.starting")
        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait_exit() == 0
    events = [e["event"] for e in d.events]
    assert "gateway.stopped" in events
    assert db_rows(home / "state.db", "PRAGMA integrity_check") == [("ok",)]


async def test_sigterm_when_idle_exits_0_and_the_published_state_says_stopped(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url)
    with run_daemon(home, port) as d:
        await d.wait_healthy()
        assert await asyncio.to_thread(ask, port, "hi") == (200, "echo: hi")
        state = json.loads((home / "gateway.state.json").read_text())
        assert state["pid"] == d.proc.pid and state["running"] is True
        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait_exit() == 0
    state = json.loads((home / "gateway.state.json").read_text())
    assert state["running"] is False and state["stopping"] is True
    assert (home / "gateway.state.json").stat().st_mode & 0o777 == 0o600
    wal = home / "state.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0  # TRUNCATE checkpoint at stop


async def test_sigterm_mid_turn_finishes_and_persists_the_turn(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url, gateway={"drain_timeout": 20})
    with run_daemon(home, port) as d:
        await d.wait_healthy()
        fake_openai.delay(1.0)
        pending = asyncio.create_task(asyncio.to_thread(ask, port, "slow one"))
        await _wait_model_called(fake_openai)
        d.proc.send_signal(signal.SIGTERM)
        assert await pending == (200, "echo: slow one")
        assert await d.wait_exit() == 0
    assert db_rows(home / "state.db", "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "slow one"), ("assistant", "echo: slow one")]


async def test_sigterm_mid_turn_past_drain_timeout_still_exits_0_keeping_the_question(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url, gateway={"drain_timeout": 0.5})
    with run_daemon(home, port) as d:
        await d.wait_healthy()
        fake_openai.hang()
        pending = asyncio.create_task(asyncio.to_thread(ask, port, "never answered"))
        await _wait_model_called(fake_openai)
        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait_exit() == 0
        assert any(e["event"] == "gateway.drain_cut" for e in d.events)
        # The waiting HTTP client gets an error or a closed connection; what matters is the db below.
        with contextlib.suppress(httpx.HTTPError):
            await pending
    assert db_rows(home / "state.db", "SELECT role, content FROM messages") == [("user", "never answered")]
    assert db_rows(home / "state.db", "PRAGMA integrity_check") == [("ok",)]
