"""Fuzzed command arguments (unicode, bidi and zero-width controls, huge) through the real
daemon: every command message gets a reply, the daemon never crashes, state.db stays sound."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from adapters.base import ChatType
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import Running, run_gateway

COMMANDS = ["title", "new", "reset", "resume", "sessions", "status", "help", "stop", "queue", "compress",
            "sethome", "handoff", "set_home", "nonexistent"]
TRICKY = "\u202e\u202d\u2066\u2067\u2069\u200b\u200d\ufeff\x00\x07\n\t #%_\\'\"`*[]()~>|{}:"

arguments = st.one_of(
    st.text(max_size=200),
    st.text(alphabet=st.sampled_from(TRICKY + "ab 1ü中🙂"), max_size=120),
    st.builds(lambda ch, n: ch * n, st.characters(blacklist_categories=("Cs",)), st.integers(90, 40_000)),
    st.sampled_from(["testchat", "telegram", "api-server", "cli", "Project #2", "2026", "_", "%", "  "]),
)


@pytest.fixture
async def fuzz_run(gateway_home: Path, fake_openai: FakeOpenAI) -> AsyncIterator[Running]:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat,
                           env={"TESTCHAT_ALLOWED_USERS": "u1"}) as run:
        await ready_to_hand_off(chat)  # so that fuzzed /handoff commands can be accepted too
        yield run
        # Still answering after all of it.
        before = len(chat.to("u1"))
        await chat.say("still there?", user="u1")
        sent = await chat.wait_sent(before + 1, chat="u1", timeout=30)
        assert sent[-1].text == "echo: still there?"
    conn = sqlite3.connect(run.db_path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


async def ready_to_hand_off(chat: ChatAdapter) -> None:
    """A home in a group and a session in u1's DM: "/handoff testchat" from the DM is accepted.
    (Examples share one daemon, and a fuzzed /sethome may have moved the home.)"""
    before = len(chat.to("room"))
    await chat.say("/sethome", user="u1", chat="room", chat_type=ChatType.GROUP)
    await chat.wait_sent(before + 1, chat="room")
    before = len(chat.to("u1"))
    await chat.say("a session to hand off", user="u1")
    await chat.wait_sent(before + 1, chat="u1")


@settings(max_examples=120, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(name=st.sampled_from(COMMANDS), args=arguments, sep=st.sampled_from([" ", "  ", "\n", "\t"]))
@example(name="handoff", args="testchat", sep=" ")  # always reach an accepted handoff
@example(name="handoff", args="TestChat  extra words", sep="\t")
async def test_fuzzed_command_arguments_always_get_a_reply(fuzz_run: Running, name: str, args: str,
                                                            sep: str) -> None:
    chat = fuzz_run.chat
    runtime = fuzz_run.gateway.runtime
    assert runtime is not None
    handoffs = runtime.handoffs
    if (name, args) == ("handoff", "testchat"):
        await ready_to_hand_off(chat)
    before = len(chat.to("u1"))
    await chat.say(f"/{name}{sep}{args}", user="u1")
    sent = await chat.wait_sent(before + 1, chat="u1", timeout=30)
    reply = sent[before].text
    assert reply.strip()
    assert "Sorry, that command failed" not in reply, reply
    assert "could not be handled" not in reply, reply
    if (name, args) == ("handoff", "testchat"):
        assert reply.startswith("⏳ Handing this session over"), reply
    if reply.startswith("⏳ Handing this session over"):
        # Accepted: the outcome follows, and the handoff settles.
        outcome = (await chat.wait_sent(before + 2, chat="u1", timeout=30))[before + 1].text
        assert outcome.startswith(("Handoff complete", "Handoff failed")), outcome
        if (name, args) == ("handoff", "testchat"):
            assert outcome.startswith("Handoff complete"), outcome
    await asyncio.wait_for(handoffs.settled(), 30)
    assert handoffs.running == 0
    assert handoffs.in_flight("agent:main:testchat:dm:u1") is None
