"""A request sent again with the same Idempotency-Key gets one answer, from one turn: the
stored answer, the running turn's answer, or its turn resumed when the first one failed.
(Across a ``kill -9``: tests/gateway/daemon/test_idempotent_retry.py.)"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import Running, run_gateway

WAIT = 30.0


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


async def keyed(run: Running, text: str, key: str, user: str = "alice") -> httpx.Response:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": user}
    return await run.http.post("/v1/chat/completions", json=body, headers={"Idempotency-Key": key})


def content(resp: httpx.Response) -> str:
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


async def test_a_retry_while_the_turn_runs_waits_for_its_answer(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        fake_openai.delay(1.0)
        first = asyncio.create_task(keyed(run, "slow question", "k-1"))
        async with asyncio.timeout(WAIT):
            while not fake_openai.chat_requests:
                await asyncio.sleep(0.02)
        again = await keyed(run, "slow question", "k-1")
        assert content(again) == content(await first) == "echo: slow question"
        assert content(await keyed(run, "slow question", "k-1")) == "echo: slow question"
    assert len(fake_openai.chat_requests) == 1
    assert rows(run.db_path, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "slow question"), ("assistant", "echo: slow question")]


async def test_a_retry_after_a_failed_turn_answers_the_stored_question(gateway_home: Path,
                                                                       fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        fake_openai.fail(500)
        assert (await keyed(run, "try me", "k-2")).status_code == 502
        assert content(await keyed(run, "try me", "k-2")) == "echo: try me"
        assert content(await keyed(run, "try me", "k-2")) == "echo: try me"  # now from state.db
    # The question was stored once, and the model saw it once in the resumed turn.
    assert rows(run.db_path, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "try me"), ("assistant", "echo: try me")]
    assert len(fake_openai.chat_requests) == 2
    resumed = fake_openai.chat_requests[-1].body["messages"]
    assert [m["content"] for m in resumed if m["role"] == "user"] == ["try me"]


async def test_a_retry_after_the_conversation_moved_on_is_a_conflict(gateway_home: Path,
                                                                     fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        fake_openai.fail(500)
        assert (await keyed(run, "first try", "k-3")).status_code == 502
        assert content(await run.ask("something else")) == "echo: something else"
        late = await keyed(run, "first try", "k-3")
        assert late.status_code == 409, late.text
        assert late.json()["error"]["code"] == "duplicate_request"
    assert [r[0] for r in rows(run.db_path, "SELECT content FROM messages ORDER BY id")] == [
        "first try", "something else", "echo: something else"]


async def test_a_stopped_request_retried_is_told_it_was_stopped(gateway_home: Path,
                                                                fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        fake_openai.hang()
        first = asyncio.create_task(keyed(run, "long job", "k-4"))
        async with asyncio.timeout(WAIT):
            while not fake_openai.chat_requests:
                await asyncio.sleep(0.02)
        assert (await run.ask("/stop")).status_code == 200
        said = content(await asyncio.wait_for(first, WAIT))
        assert said.startswith("⚡ Stopped before the answer was finished")
        assert content(await keyed(run, "long job", "k-4")) == said
    assert len(fake_openai.chat_requests) == 1


async def test_keys_are_per_user(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        assert content(await keyed(run, "mine", "shared-key", user="alice")) == "echo: mine"
        assert content(await keyed(run, "yours", "shared-key", user="bob")) == "echo: yours"
