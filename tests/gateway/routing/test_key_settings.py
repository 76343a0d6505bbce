"""One chat, one key: with non-default key rules, the router, /handoff, the control socket
and the terminal chat all compute the key the router computes for the same chat.

The daemon once built two of these with the default ``SessionKeySettings()``: with
``group_sessions_per_user: false`` a session handed off into a group was bound to a
per-user key that no message in that group ever maps to.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from adapters.base import ChatType
from gateway.control.client import ChatConnection
from gateway.routing.session_key import SessionKeySettings, build_session_key
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway
from tests.gateway.handoff.test_handoff_daemon import ALLOW, bound, contents, rows, say, set_home

SHARED_GROUPS = {"gateway": {"group_sessions_per_user": False, "thread_sessions_per_user": True}}
ROOM = "agent:main:testchat:group:room"  # every member of the room shares this key


async def test_configured_key_rules_reach_the_router_and_the_handoff(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW, config=SHARED_GROUPS) as run:
        runtime = run.gateway.runtime
        assert runtime is not None
        keys = runtime.services.key_settings
        assert keys == SessionKeySettings(group_sessions_per_user=False, thread_sessions_per_user=True)
        await set_home(chat)
        await say(run, "the plan")
        sid = bound(run.db_path, "agent:main:api-server:dm:alice")
        done = await say(run, "/handoff testchat")
        assert done.startswith("Handoff complete"), done
        # /handoff: the destination key is the router's key for the home chat.
        assert rows(run.db_path, "SELECT target_key FROM gateway_handoffs") == [(ROOM,)]
        assert bound(run.db_path, ROOM) == sid
        # The router: the next message there (from another member: the room is shared) continues it.
        before = len(chat.to("room"))
        await chat.say("carry on", user="u2", chat="room", chat_type=ChatType.GROUP)
        await chat.wait_sent(before + 1, chat="room")
        assert contents(run.db_path, sid)[-2:] == ["carry on", "echo: carry on"]


async def test_the_terminal_chat_and_the_control_socket_use_the_routers_key(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url, config=SHARED_GROUPS) as run:
        runtime = run.gateway.runtime
        assert runtime is not None
        chat = await ChatConnection.open(gateway_home)
        try:
            sent = await chat.send("hello daemon")
            assert sent["disposition"] == "accepted"
            while (event := await asyncio.wait_for(chat.next_event(), 15)) and event.get("event") != "done":
                pass
            info = await chat.info()  # the control socket's own lookup of this chat's session
        finally:
            await chat.close()
        cli = runtime.services.adapters["cli"]
        [(user,)] = rows(run.db_path, "SELECT user_id FROM sessions WHERE source = 'cli'")
        template = cli.message(chat.opened["chat_id"], "", user_id=user)  # type: ignore[attr-defined]
        key = build_session_key(template, runtime.services.key_settings)
        assert info["session_id"] is not None
        assert bound(run.db_path, key) == info["session_id"]
