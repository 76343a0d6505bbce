"""Approvals over the HTTP API, through the whole daemon: no buttons, so the question is text and the
client answers with a second request from the same ``user`` (``/approve <id>``, ``/deny <id>``).

A streamed request shows the question in its stream, then the outcome, then the answer; a request
without a stream is answered by the question itself, and the request that answers the question gets
the turn's answer after the command's reply.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx

from tests.adapters._approval_tool import approving_agents, tool_results
from tests.adapters.test_api_server_stream import DONE, SseClient, assembled
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway

WAIT = 20.0
_ID = re.compile(r"/approve ([A-Za-z0-9]{8})")


async def ask(http: httpx.AsyncClient, text: str, user: str = "alice") -> str:
    resp = await http.post("/v1/chat/completions", json={"model": "fake-model", "user": user,
                                                          "messages": [{"role": "user", "content": text}]})
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


async def question_in(stream: SseClient) -> str:
    """The approval id, once the stream has shown the question."""
    async def shown() -> str:
        while True:
            event = await stream.next()
            assert event != DONE
            found = _ID.search(assembled(stream.all))
            if found:
                return found.group(1)

    return await asyncio.wait_for(shown(), WAIT)


def touch(fake_openai: FakeOpenAI, marker: Path, answer: str) -> None:
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(marker)}}]).reply(answer)


async def test_a_streamed_request_shows_the_question_and_a_second_request_approves(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    marker = tmp_path / "marker"
    touch(fake_openai, marker, "Done, the marker is there.")
    async with run_gateway(tmp_path / "h", fake_openai.base_url, agent_maker=approving_agents()) as gw:
        stream = SseClient(gw.http, "touch the marker")
        approval_id = await question_in(stream)
        assert not marker.exists()
        # Someone else (another ``user``) cannot answer it.
        refused = await ask(gw.http, f"/approve {approval_id}", user="mallory")
        assert "Only alice can answer" in refused and "still waiting" in refused
        assert await ask(gw.http, f"/approve {approval_id}") == "✅ Approved by alice."
        events = await stream.done()
        text = assembled(events)
        assert events[-1] == DONE
        question = text.index(f"touch {marker}")
        outcome = text.index("✅ Approved by alice")
        assert question < outcome < text.index("Done, the marker is there.")
        assert marker.exists()
        # Answered twice: the second hears it.
        again = await ask(gw.http, f"/deny {approval_id}")
        assert "already answered" in again and "Approved by alice" in again


async def test_a_request_without_a_stream_gets_the_question_and_deny_is_heard_by_the_model(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    marker = tmp_path / "marker"
    touch(fake_openai, marker, "I left it alone.")
    async with run_gateway(tmp_path / "h", fake_openai.base_url, agent_maker=approving_agents()) as gw:
        question = await ask(gw.http, "touch the marker")
        found = _ID.search(question)
        assert found is not None and f"touch {marker}" in question and "/deny" in question
        # The one waiting in this chat; the answer's response carries the turn's answer after it.
        assert await ask(gw.http, "/deny") == "⛔ Denied by alice.\n\nI left it alone."
        [result] = tool_results([r.body for r in fake_openai.chat_requests])
        assert "did not approve" in result and not marker.exists()
        assert "Nothing is waiting" in await ask(gw.http, "/approve")
        unknown: Any = await ask(gw.http, "/approve ZZZZ9999")
        assert "No approval ZZZZ9999 is waiting" in unknown


async def test_after_a_timeout_the_late_answer_waits_for_the_users_next_approval_request(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    marker = tmp_path / "marker"
    touch(fake_openai, marker, "Nobody said yes.")
    async with run_gateway(tmp_path / "h", fake_openai.base_url, agent_maker=approving_agents(),
                           config={"tools": {"approval_timeout": 0.5}}) as gw:
        found = _ID.search(await ask(gw.http, "touch the marker"))
        assert found is not None

        async def answered() -> None:
            while len(fake_openai.chat_requests) < 2:
                await asyncio.sleep(0.05)

        await asyncio.wait_for(answered(), WAIT)
        await asyncio.sleep(0.3)  # the turn's answer has come, and nobody waited for it
        late = await ask(gw.http, f"/approve {found.group(1)}")
        assert late.startswith("Too late") and late.endswith("Nobody said yes.") and not marker.exists()
