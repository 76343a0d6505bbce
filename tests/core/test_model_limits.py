"""A turn's time budget (``model.turn_timeout``) and the cap on what is read of an answer
(``model.max_response_bytes``), against FakeOpenAI over HTTP and a real state.db.

No assertion is about elapsed time: the budgets are set so that only the
behaviour asked for can pass (an attempt timeout far past the budget, answers
slower together than the budget), and the tests count what the server saw.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from core import ModelClient, ModelResponseError, ModelSettings, ModelTimeoutError, ModelUnavailableError
from core._background import BackgroundTasks
from core._budget import current_budget, turn_budget
from core._loop import cut_note
from storage import StateStore
from tests.fakes.openai_server import FakeOpenAI

from ._agent_env import db_messages, make_runtime, new_session, request, sample_tools

HELLO = [{"role": "user", "content": "hello"}]
# An attempt may take a minute: only the turn's budget can end a hung one within the test's timeout.
PATIENT = ModelSettings(model="m", timeout=60, backoff_base=0.001, backoff_max=0.01, max_retries=3)
CAP = 64 * 2**10


def _client(fake: FakeOpenAI, **overrides: object) -> ModelClient:
    return ModelClient(replace(PATIENT, base_url=fake.base_url, **overrides))  # type: ignore[arg-type]


# ------------------------------------------------------------------ the turn's budget


async def test_a_hung_model_ends_when_the_turn_budget_does(fake_openai: FakeOpenAI) -> None:
    for _ in range(4):
        fake_openai.hang()
    async with _client(fake_openai) as client:
        with turn_budget(0.5), pytest.raises(ModelTimeoutError) as caught:
            await asyncio.wait_for(client.chat(HELLO), 30)
    assert len(fake_openai.chat_requests) == 1  # its one attempt was cut to the budget; no retry fits after it
    error = caught.value
    assert error.turn_timeout == 0.5 and error.attempts == 1
    assert "time budget of 0.5s ran out" in str(error) and "model.turn_timeout" in str(error)


async def test_a_retry_that_cannot_fit_the_budget_is_not_started(fake_openai: FakeOpenAI) -> None:
    fake_openai.fail(503, headers={"retry-after-ms": "300"})
    async with _client(fake_openai) as client:
        with turn_budget(0.5), pytest.raises(ModelUnavailableError) as caught:
            await client.chat(HELLO)
        assert len(fake_openai.chat_requests) == 1 and caught.value.status == 503
        # Outside a turn (and in a turn with room for it) the same wait is taken.
        fake_openai.fail(503, headers={"retry-after-ms": "300"}).reply("after the wait")
        assert (await client.chat(HELLO)).content == "after the wait"
        fake_openai.fail(503, headers={"retry-after-ms": "300"}).reply("after the wait")
        with turn_budget(30):
            assert (await client.chat(HELLO)).content == "after the wait"
    assert len(fake_openai.chat_requests) == 5


async def test_a_spent_budget_fails_the_next_call_before_it_is_sent(fake_openai: FakeOpenAI) -> None:
    async with _client(fake_openai) as client:
        with turn_budget(0.05), pytest.raises(ModelTimeoutError) as caught:
            await asyncio.sleep(0.1)
            await client.chat(HELLO)
    assert fake_openai.chat_requests == [] and caught.value.attempts == 0


async def test_the_budget_does_not_follow_background_work_out_of_the_turn() -> None:
    seen: list[object] = []

    async def later() -> None:
        seen.append(current_budget())

    tasks = BackgroundTasks()
    with turn_budget(5) as budget:
        assert current_budget() is budget
        with turn_budget(60) as inner:
            assert inner is budget  # a nested budget never outlasts the turn's
        tasks.spawn(later(), name="review")
    await tasks.join()
    assert seen == [None] and current_budget() is None


async def test_one_budget_covers_every_model_call_of_a_turn(store: StateStore, db_path: Path,
                                                            fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store)
    # Each step answers within the budget; together they do not.
    for step in range(3):
        fake_openai.delay(0.4).reply_tool_calls([{"id": f"c{step}", "name": "echo", "arguments": {"text": "x"}}])
    fake_openai.reply("done")
    async with _client(fake_openai, model="fake-model", turn_timeout=1.0) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        with pytest.raises(ModelTimeoutError) as caught:
            await asyncio.wait_for(rt.agent(request("go")).run_turn(request("go")), 30)
    assert caught.value.turn_timeout == 1.0
    assert 2 <= len(fake_openai.chat_requests) <= 3  # never the fourth call, which would have answered "done"
    assert "done" not in [m["content"] for m in db_messages(db_path, "s1")]


def test_settings_refuse_a_budget_or_cap_out_of_range() -> None:
    for bad in ({"turn_timeout": 0}, {"max_response_bytes": 1000}, {"max_response_bytes": 64 * 2**20}):
        with pytest.raises(ValueError, match="model\\."):
            ModelSettings(**bad)  # type: ignore[arg-type]


# ------------------------------------------------------------------ the cap on an answer


async def test_an_answer_past_the_cap_is_cut_there(fake_openai: FakeOpenAI) -> None:
    answer = "".join(f"line {i}: \"quoted\" \\ é 😀\n" for i in range(20_000))  # ~600 KB of JSON
    fake_openai.reply(answer)
    async with _client(fake_openai, max_response_bytes=CAP) as client:
        result = await client.chat(HELLO)
    assert result.cut_at == CAP
    assert result.content is not None and answer.startswith(result.content)
    assert CAP // 2 < len(result.content.encode()) < CAP


async def test_an_answer_within_the_cap_is_whole(fake_openai: FakeOpenAI) -> None:
    answer = "y" * (CAP // 2)
    fake_openai.reply(answer)
    async with _client(fake_openai, max_response_bytes=CAP) as client:
        result = await client.chat(HELLO)
    assert result.cut_at is None and result.content == answer


async def test_a_body_past_the_cap_that_is_no_completion_says_what_to_change(fake_openai: FakeOpenAI) -> None:
    fake_openai.respond(200, "<html>" + "x" * 200_000)
    async with _client(fake_openai, max_response_bytes=CAP) as client:
        with pytest.raises(ModelResponseError) as caught:
            await client.chat(HELLO)
    assert "longer than 64 KB" in str(caught.value) and "model.max_response_bytes" in str(caught.value)
    assert len(fake_openai.chat_requests) == 1


async def test_a_cut_answer_ends_the_turn_saying_so_and_is_stored_once(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    answer = "z" * 200_000
    fake_openai.reply_tool_calls([{"name": "echo", "arguments": {"text": "x"}}], content=answer)
    async with _client(fake_openai, model="fake-model", max_response_bytes=CAP) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await asyncio.wait_for(rt.agent(request("go")).run_turn(request("go")), 30)
    text = result.text
    assert text.endswith(cut_note(CAP)) and "64 KB" in text
    assert len(fake_openai.chat_requests) == 1  # the tool calls after the cut were not made
    stored = db_messages(db_path, "s1")
    assert [m["role"] for m in stored] == ["user", "assistant"] and stored[1]["content"] == text
    assert stored[1]["tool_calls"] is None


async def test_the_loop_runs_while_a_big_answer_is_parsed() -> None:
    """The body reaches the client in one piece (an httpx transport that has it all), so any
    turn of the event loop during ``chat`` is one the parse gave up; over a socket the
    network's own waits would hide a parse that holds the loop."""
    answer = "word " * 800_000  # 4 MB
    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": answer}}]}).encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    ticks, stop = 0, asyncio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    settings = ModelSettings(base_url="http://model.invalid/v1", model="m", max_response_bytes=8 * 2**20)
    async with ModelClient(settings, transport=transport) as client:
        beat = asyncio.create_task(heartbeat())
        await asyncio.sleep(0)
        before = ticks
        result = await client.chat(HELLO)
        during = ticks - before
        stop.set()
        await beat
    assert result.content == answer and result.cut_at is None
    assert during >= 15  # at least once per slice (4 MB: 32 of 128 KB) and scan window
