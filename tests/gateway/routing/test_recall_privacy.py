"""Recall stays private: through the real daemon, one user's agent calling session_search
never sees another user's DM, while the user who wrote it finds it (issue 18, point 3)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from adapters.base import SendKind
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1,u2"}
SECRET = "my vault code is bridgeport-7731"


def _tool_results(db: Path, user: str) -> list[dict[str, Any]]:
    """What session_search gave the agent in ``user``'s DM, oldest first, read from state.db."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT m.content FROM messages m JOIN gateway_session_bindings b ON b.session_id = m.session_id "
            "WHERE b.session_key = ? AND m.role = 'tool' AND m.tool_name = 'session_search' ORDER BY m.id",
            (f"agent:main:testchat:dm:{user}",),
        ).fetchall()
    finally:
        conn.close()
    # A refused call's result is the refusal's text, not JSON.
    return [json.loads(r[0]) if r[0].startswith("{") else {"refused": r[0]} for r in rows]


def _secret_session(db: Path) -> tuple[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        sid, mid = conn.execute("SELECT session_id, id FROM messages WHERE content = ?", (SECRET,)).fetchone()
    finally:
        conn.close()
    return str(sid), int(mid)


async def _turn(chat: ChatAdapter, user: str, text: str) -> None:
    """One message and its one reply (turns run one after another, so nothing is queued)."""
    sent = len(chat.to(user))
    await chat.say(text, user=user)
    await chat.wait_sent(sent + 1, chat=user, timeout=20)


async def test_another_users_agent_finds_nothing_of_a_dm_its_writer_finds(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat) as gw:
        await _turn(chat, "u1", SECRET)
        secret_session, secret_id = _secret_session(gw.db_path)

        # u2's agent tries all three shapes: discovery, browse, and a scroll by id.
        fake_openai.reply_tool_calls([
            {"name": "session_search", "arguments": {"query": "bridgeport"}},
            {"name": "session_search", "arguments": {}},
            {"name": "session_search", "arguments": {"session_id": secret_session, "around_message_id": secret_id}},
        ]).reply("I found nothing about that.")
        await _turn(chat, "u2", "what is u1's vault code?")

        # u1, in a fresh session, asks the same.
        await _turn(chat, "u1", "/new")
        fake_openai.reply_tool_calls([{"name": "session_search", "arguments": {"query": "bridgeport"}}]).reply(
            "It is bridgeport-7731.")
        await _turn(chat, "u1", "what was my vault code?")

    discovery, browse, scroll = _tool_results(gw.db_path, "u2")
    assert discovery["count"] == 0 and discovery["results"] == []
    assert browse["sessions"] == []
    assert "No session of this conversation" in scroll["refused"]
    everything_u2_saw = json.dumps([discovery, browse, scroll])
    assert "7731" not in everything_u2_saw and "vault code is" not in everything_u2_saw
    assert "7731" not in json.dumps([m.text for m in chat.to("u2")])
    assert not [m for m in chat.to("u2") if m.kind is not SendKind.REPLY]

    (found,) = _tool_results(gw.db_path, "u1")
    (hit,) = found["results"]
    assert hit["session_id"] == secret_session and hit["match_message_id"] == secret_id
    assert ">>>bridgeport" in hit["snippet"]


async def test_scope_all_lets_a_single_user_setup_recall_everything(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat,
                           config={"session_search": {"scope": "all"}}) as gw:
        await _turn(chat, "u1", SECRET)
        fake_openai.reply_tool_calls([{"name": "session_search", "arguments": {"query": "bridgeport"}}]).reply("ok")
        await _turn(chat, "u2", "what is the vault code?")
    (found,) = _tool_results(gw.db_path, "u2")
    assert [r["session_id"] for r in found["results"]] == [_secret_session(gw.db_path)[0]]


async def test_an_owner_recalls_everything_the_others_only_their_own(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat,
                           config={"session_search": {"owners": ["testchat:u2"]}}) as gw:
        await _turn(chat, "u1", SECRET)
        fake_openai.reply_tool_calls([{"name": "session_search", "arguments": {"query": "bridgeport"}}]).reply("ok")
        await _turn(chat, "u2", "what is the vault code?")
    (found,) = _tool_results(gw.db_path, "u2")
    assert found["count"] == 1
