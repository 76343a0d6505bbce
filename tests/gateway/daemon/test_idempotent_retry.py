"""A request cut off by a crash is completed by its retry (same Idempotency-Key), exactly once,
across a real ``kill -9`` of the daemon process and a restart."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.ops._proc import db_rows, free_port, run_daemon, write_home

WAIT = 30.0
#: a title is a model call of its own: the counts below are of the turns' calls
NO_TITLES = {"auto_title": False}


def post(port: int, text: str, key: str) -> tuple[int, str]:
    r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": text}], "user": "alice"},
                   headers={"Idempotency-Key": key}, timeout=60)
    return r.status_code, (r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.text)


async def until_model_called(fake: FakeOpenAI, n: int) -> None:
    async with asyncio.timeout(WAIT):
        while len(fake.chat_requests) < n:
            await asyncio.sleep(0.02)


async def test_a_turn_cut_off_by_kill_9_is_completed_by_the_retry(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home, port = tmp_path / "h", free_port()
    write_home(home, port, fake_openai.base_url, agent=NO_TITLES)
    fake_openai.hang()  # the model holds its answer: the daemon dies mid-turn
    with run_daemon(home, port) as daemon:
        await daemon.wait_healthy()
        pending = asyncio.create_task(asyncio.to_thread(post, port, "lost in flight?", "k-9"))
        await until_model_called(fake_openai, 1)
        daemon.proc.kill()
        assert await daemon.wait_exit() == -signal.SIGKILL
        with pytest.raises(httpx.TransportError):
            await pending
    assert db_rows(home / "state.db", "SELECT role, content FROM messages") == [("user", "lost in flight?")]

    with run_daemon(home, port) as daemon:
        await daemon.wait_healthy()
        # Two retries at once: one resumes the turn, the other waits for it.
        first, second = await asyncio.gather(asyncio.to_thread(post, port, "lost in flight?", "k-9"),
                                             asyncio.to_thread(post, port, "lost in flight?", "k-9"))
        assert first == second == (200, "echo: lost in flight?")
        daemon.proc.send_signal(signal.SIGTERM)
        assert await daemon.wait_exit() == 0
    db = home / "state.db"
    assert db_rows(db, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "lost in flight?"), ("assistant", "echo: lost in flight?")]
    assert db_rows(db, "PRAGMA integrity_check") == [("ok",)]
    assert len(fake_openai.chat_requests) == 2  # the cut-off call, and the one that answered
    asked = fake_openai.chat_requests[-1].body["messages"]
    assert [m["content"] for m in asked if m["role"] == "user"] == ["lost in flight?"]


async def test_an_answer_stored_before_kill_9_is_given_to_the_retry(tmp_path: Path,
                                                                    fake_openai: FakeOpenAI) -> None:
    home, port = tmp_path / "h", free_port()
    write_home(home, port, fake_openai.base_url, agent=NO_TITLES)
    with run_daemon(home, port) as daemon:
        await daemon.wait_healthy()
        assert await asyncio.to_thread(post, port, "answer me", "k-10") == (200, "echo: answer me")
        daemon.proc.kill()
        assert await daemon.wait_exit() == -signal.SIGKILL
    with run_daemon(home, port) as daemon:
        await daemon.wait_healthy()
        assert await asyncio.to_thread(post, port, "answer me", "k-10") == (200, "echo: answer me")
    assert len(fake_openai.chat_requests) == 1
    assert db_rows(home / "state.db", "SELECT COUNT(*) FROM messages") == [(2,)]
