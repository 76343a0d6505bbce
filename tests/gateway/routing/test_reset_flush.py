"""Automatic resets: decided when due, and the agent's turn before each one (memories and
skills) runs beside the chat, never in front of the user's next message."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1"}
IDLE = {"session_reset": {"mode": "idle", "idle_minutes": 1}}


def rows(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def is_reset_flush(body: dict[str, Any]) -> bool:
    return any("this session is being reset" in str(m.get("content"))
               for m in body.get("messages") or [] if isinstance(m, dict))


def two_hours_pass(db: Path) -> None:
    conn = sqlite3.connect(db)
    conn.execute("UPDATE messages SET timestamp = timestamp - 7200")
    conn.execute("UPDATE gateway_session_index SET updated_at = updated_at - 7200")
    conn.commit()
    conn.close()


def tool_names(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


async def test_the_sweeper_resets_a_due_session_and_the_next_message_does_not_wait_for_its_flush(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    flush = fake_openai.hold_when(is_reset_flush)
    chat = ChatAdapter()
    config = {**IDLE, "gateway": {"sweep_interval_seconds": 0.05}}
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=config) as gw:
        await chat.say("I always deploy with make ship", user="u1")
        await chat.wait_sent(1, chat="u1")
        (old,), = rows(gw.db_path, "SELECT id FROM sessions")
        two_hours_pass(gw.db_path)
        # No one writes: the sweeper decides the reset and the flush turn starts (and is held).
        await asyncio.wait_for(flush.arrived.wait(), 10)
        assert rows(gw.db_path, "SELECT end_reason FROM sessions WHERE id = ?", old) == [("session_reset:idle",)]
        await chat.say("after the break", user="u1")
        sent = await chat.wait_sent(2, chat="u1")  # answered while the flush is still held
        assert sent[-1].text == "echo: after the break"
        assert not flush.release.is_set()
        flush.release.set()
        assert gw.gateway.runtime is not None
        await gw.gateway.runtime.turns.resets.join()
    flushes = [r.body for r in fake_openai.chat_requests if is_reset_flush(r.body)]
    assert len(flushes) == 1
    assert {"memory", "skill_manage", "skills_list"} <= tool_names(flushes[0])
    assert any("make ship" in str(m.get("content")) for m in flushes[0]["messages"])
    new = rows(gw.db_path, "SELECT id FROM sessions WHERE ended_at IS NULL")
    assert len(new) == 1 and new[0][0] != old


async def test_a_message_that_finds_its_session_due_is_answered_before_the_flush_ends(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    # The sweeper has not come by (its default interval is minutes): the message rotates the session.
    flush = fake_openai.hold_when(is_reset_flush)
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, config=IDLE) as gw:
        await chat.say("before the break", user="u1")
        await chat.wait_sent(1, chat="u1")
        (old,), = rows(gw.db_path, "SELECT id FROM sessions")
        two_hours_pass(gw.db_path)
        await chat.say("after the break", user="u1")
        sent = await chat.wait_sent(2, chat="u1")
        assert sent[-1].text == "echo: after the break"
        await asyncio.wait_for(flush.arrived.wait(), 10)
        assert not flush.release.is_set()
        flush.release.set()
        assert gw.gateway.runtime is not None
        await gw.gateway.runtime.turns.resets.join()
    flushes = [r.body for r in fake_openai.chat_requests if is_reset_flush(r.body)]
    assert len(flushes) == 1 and {"memory", "skill_manage"} <= tool_names(flushes[0])
    assert rows(gw.db_path, "SELECT end_reason FROM sessions WHERE id = ?", old) == [("session_reset:idle",)]
