"""Property: every message the agent produces is in state.db, in order (the lost-assistant-messages bug).

The reference bug lost final assistant answers when an index of "messages
flushed so far" overshot the list after empty placeholders were dropped. Here
random tool-call scripts run through fresh agents, turn after turn, on one
session, and the database must hold exactly the produced messages.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import StateStore, WriterSettings
from tests.fakes.openai_server import FakeOpenAI

from ._agent_env import (
    assert_consistent,
    db_messages,
    make_client,
    make_runtime,
    new_session,
    request,
    sample_tools,
)

TOOL_RESULT = {"echo": "echoed {text}", "fail": "Error: the disk is on fire; try another path"}

call = st.sampled_from(["echo", "fail"])
round_ = st.tuples(st.lists(call, min_size=1, max_size=3), st.sampled_from([None, "", "thinking aloud"]))
turn = st.tuples(st.lists(round_, max_size=4), st.sampled_from(["final answer", "", "ok"]))


async def _scenario(turns: list[tuple[list[tuple[list[str], str | None]], str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "state.db"
        async with FakeOpenAI() as fake, StateStore(db, writer_settings=WriterSettings(synchronous="OFF")) as store:
            await new_session(store)
            expected: list[tuple[str, Any, Any]] = []
            async with make_client(fake) as client:
                rt = make_runtime(store, client, Path(tmp), tools=sample_tools())
                for t, (rounds, final) in enumerate(turns):
                    text = f"turn {t}"
                    expected.append(("user", text, None))
                    for r, (calls, content) in enumerate(rounds):
                        scripted = [{"id": f"t{t}r{r}c{i}", "name": name, "arguments": {"text": f"{t}.{r}.{i}"}}
                                    for i, name in enumerate(calls)]
                        fake.reply_tool_calls(scripted, content=content)
                        expected.append(("assistant", content, [c["id"] for c in scripted]))
                        for c in scripted:
                            result = TOOL_RESULT[c["name"]].format(text=c["arguments"]["text"])
                            expected.append(("tool", result, c["id"]))
                    fake.reply(final)
                    if final:
                        expected.append(("assistant", final, None))
                    await rt.agent(request(text)).run_turn(request(text))
            stored = db_messages(db, "s1")
            got = [
                (m["role"], m["content"],
                 [c["id"] for c in m["tool_calls"]] if m["tool_calls"] else m["tool_call_id"])
                for m in stored
            ]
            assert got == expected
            assert_consistent(stored)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(turn, min_size=1, max_size=3))
def test_every_produced_message_is_stored_in_order(turns: list[Any]) -> None:
    asyncio.run(asyncio.wait_for(_scenario(turns), 120))
