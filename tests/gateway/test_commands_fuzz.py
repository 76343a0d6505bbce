"""Fuzzed command arguments (unicode, bidi and zero-width controls, huge) through the real
daemon: every command message gets a reply, the daemon never crashes, state.db stays sound."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes.openai_server import FakeOpenAI

from ._chat_adapter import ChatAdapter
from .conftest import Running, run_gateway

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


@settings(max_examples=120, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(name=st.sampled_from(COMMANDS), args=arguments, sep=st.sampled_from([" ", "  ", "\n", "\t"]))
async def test_fuzzed_command_arguments_always_get_a_reply(fuzz_run: Running, name: str, args: str,
                                                            sep: str) -> None:
    chat = fuzz_run.chat
    assert fuzz_run.gateway.services is not None
    before = len(chat.to("u1"))
    await chat.say(f"/{name}{sep}{args}", user="u1")
    sent = await chat.wait_sent(before + 1, chat="u1", timeout=30)
    reply = sent[before].text
    assert reply.strip()
    assert "Sorry, that command failed" not in reply, reply
    assert "could not be handled" not in reply, reply
    # A handoff that started must also settle (no home is set here, so it is always refused).
    assert fuzz_run.gateway.services.handoffs is not None
    assert fuzz_run.gateway.services.handoffs.running == 0
