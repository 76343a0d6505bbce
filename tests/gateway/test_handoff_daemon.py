"""/handoff inside the real daemon, to a test platform without threads: failures of the
summary turn, the runner's own timeout, and rows a dead process left behind."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from adapters.base import ChatType
from storage import StateStore, WriterSettings
from tests.fakes.openai_server import FakeOpenAI

from ._chat_adapter import ChatAdapter
from .conftest import Running, run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1"}
HOME_KEY = "agent:main:testchat:group:room"


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def say(run: Running, text: str, user: str = "alice") -> str:
    resp = await run.ask(text, user=user)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


async def set_home(chat: ChatAdapter) -> None:
    await chat.say("/sethome", user="u1", chat="room", chat_type=ChatType.GROUP)
    await chat.wait_sent(1, chat="room")


async def test_a_failed_summary_turn_fails_the_handoff_and_a_retry_works(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        await set_home(chat)
        await say(run, "the plan")
        fake_openai.fail(400, "context too long")
        failed = await say(run, "/handoff testchat")
        assert failed.startswith("Handoff failed: the agent could not write its summary in testchat")
        assert rows(run.db_path, "SELECT state FROM gateway_handoffs") == [("failed",)]
        chat.fail_sends = 1  # the next summary cannot be sent either
        failed = await say(run, "/handoff testchat")
        assert failed.startswith("Handoff failed: sending the summary to testchat failed (ConnectionError")
        done = await say(run, "/handoff testchat")
        assert done.startswith("Handoff complete")
        assert [r[0] for r in rows(run.db_path, "SELECT state FROM gateway_handoffs ORDER BY id")] == [
            "failed", "failed", "completed"
        ]


async def test_the_runner_times_out_its_own_claimed_handoff(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW,
                           config={"sessions": {"handoff_timeout_seconds": 0.5}}) as run:
        await set_home(chat)
        await say(run, "slow one next")
        fake_openai.hang()
        failed = await say(run, "/handoff testchat")
        assert failed.startswith("Handoff failed: timed out after 0.5s")
        (state, error), = rows(run.db_path, "SELECT state, error FROM gateway_handoffs")
        assert (state, error) == ("failed", "timed out after 0.5s")
        # The stuck summary turn was stopped; the destination's lane is free again.
        assert (await say(run, "/handoff testchat")).startswith("Handoff complete")


async def test_rows_a_dead_daemon_left_live_are_failed_at_start(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with StateStore(gateway_home / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        now = time.time()
        await store.write(lambda c: c.executemany(
            "INSERT INTO gateway_handoffs (session_id, source_key, source_platform, target_platform, state, "
            "created_at, updated_at) VALUES (?, 'k', 'api-server', 'testchat', ?, ?, ?)",
            [("s1", "pending", now, now), ("s2", "claimed", now, now), ("s3", "completed", now, now)],
        ))
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        states = rows(run.db_path, "SELECT session_id, state, error FROM gateway_handoffs ORDER BY id")
        assert [s[:2] for s in states] == [("s1", "failed"), ("s2", "failed"), ("s3", "completed")]
        assert "restarted" in states[0][2]
