"""The local HTTP API answers as the OpenAI API does, against a real daemon over real HTTP:
failures are HTTP statuses with error objects, ``usage`` is the turn's token counts, /stop
ends the request it stops, and bad text is refused without leaving anything behind."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from adapters.base import ChatType
from gateway.routing.turns import STOPPED_REPLY
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import Running, run_gateway

WAIT = 30.0


@pytest.fixture
def gateway_home(tmp_path: Path) -> Path:
    return tmp_path / "hermes"


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def error_of(resp: httpx.Response, status: int) -> dict[str, Any]:
    """The OpenAI-style error object of ``resp``, which must have ``status``."""
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error"} and {"message", "type", "code"} <= set(body["error"]), body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return dict(body["error"])


async def until_model_called(fake: FakeOpenAI, n: int = 1) -> None:
    async with asyncio.timeout(WAIT):
        while len(fake.chat_requests) < n:
            await asyncio.sleep(0.02)


async def test_request_errors_are_openai_error_objects(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        post = run.http.post
        assert error_of(await post("/v1/chat/completions", content=b"{not json"), 400)["code"] == "invalid_json"
        assert error_of(await run.ask(""), 400)["type"] == "invalid_request_error"
        too_big = await post("/v1/chat/completions", content=b'{"messages": "' + b"x" * (2 * 1024 * 1024) + b'"}')
        assert error_of(too_big, 413)["code"] == "request_too_large"
        too_long = error_of(await run.ask("y" * 40_000), 413)
        assert too_long["code"] == "message_too_long" and "40000 characters" in too_long["message"]
        # Unknown routes under /v1 and wrong methods answer in the same shape.
        assert error_of(await run.http.get("/v1/embeddings"), 404)["message"] == "Invalid URL (GET /v1/embeddings)."
        assert error_of(await run.http.get("/v1/chat/completions"), 405)["code"] == "method_not_allowed"
        # A model we do not serve is refused, naming the one we do; no model at all is fine.
        unknown = error_of(await run.ask("hi", model="gpt-4o"), 404)
        assert unknown["code"] == "model_not_found" and "fake-model" in unknown["message"]
        body = {"messages": [{"role": "user", "content": "no model named"}], "user": "alice"}
        assert (await post("/v1/chat/completions", json=body)).json()["choices"][0]["message"]["content"] == (
            "echo: no model named")
        assert (await run.http.get("/v1/models")).json()["data"][0]["id"] == "fake-model"
    assert len(fake_openai.chat_requests) == 1


async def test_a_wrong_key_is_a_401_error_object(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url, env={"API_SERVER_KEY": "k-123"}) as run:
        error = error_of(await run.ask("hi"), 401)
        assert (error["type"], error["code"]) == ("authentication_error", "invalid_api_key")
        assert error_of(await run.http.get("/v1/nothing-here"), 401)["code"] == "invalid_api_key"


@pytest.mark.parametrize(
    ("status", "headers", "expected", "code"),
    [
        (500, None, 502, "upstream_error"),
        (408, None, 504, "upstream_timeout"),
        (429, {"Retry-After": "7"}, 429, "rate_limit_exceeded"),
    ],
)
async def test_model_failures_map_to_gateway_statuses(gateway_home: Path, fake_openai: FakeOpenAI, status: int,
                                                      headers: dict[str, str] | None, expected: int,
                                                      code: str) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        fake_openai.fail(status, headers=headers)
        resp = await run.ask("hi")
        error = error_of(resp, expected)
        assert error["code"] == code and not error["message"].startswith("⚠️")
        if expected == 429:
            assert resp.headers["Retry-After"] == "7"  # what the provider asked for, passed on


async def test_a_full_queue_is_a_429_with_retry_after(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url, config={"gateway": {"max_queued_per_session": 1}}) as run:
        assert run.gateway.services is not None
        lanes = run.gateway.services.lanes
        fake_openai.hang()
        first = asyncio.create_task(run.ask("a long task"))
        await until_model_called(fake_openai)
        second = asyncio.create_task(run.ask("queued behind it"))
        async with asyncio.timeout(WAIT):
            while lanes.total_waiting < 1:
                await asyncio.sleep(0.02)
        full = await run.ask("one too many")
        assert error_of(full, 429)["code"] == "queue_full"
        assert int(full.headers["Retry-After"]) > 0
        assert (await run.ask("/stop")).status_code == 200
        assert (await asyncio.wait_for(second, WAIT)).json()["choices"][0]["message"]["content"] == (
            "echo: queued behind it")
        await asyncio.wait_for(first, WAIT)


async def test_usage_is_summed_over_the_turns_model_calls(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        fake_openai.reply_tool_calls([{"name": "no_such_tool", "arguments": {}}],
                                     usage={"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13})
        fake_openai.reply("done", usage={"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25})
        resp = await run.ask("use a tool")
        assert resp.status_code == 200, resp.text
        assert resp.json()["usage"] == {"prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38}
        # Streamed, with stream_options.include_usage: one last chunk carries it, as OpenAI sends it.
        fake_openai.reply("streamed", usage={"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6})
        streamed = await run.ask("again", stream=True, stream_options={"include_usage": True})
        chunks = [json.loads(line[6:]) for line in streamed.text.splitlines()
                  if line.startswith("data: {")]
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
            "prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
        assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1]) == "streamed"


async def test_stop_answers_the_request_it_stopped(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        fake_openai.hang()
        stopped = asyncio.create_task(run.ask("a long task"))
        await until_model_called(fake_openai)
        stop = await run.ask("/stop")
        assert stop.json()["choices"][0]["message"]["content"].startswith("⚡ Stopped.")
        # The request that started the turn ends too (it used to wait for its reply_timeout).
        resp = await asyncio.wait_for(stopped, WAIT)
        assert resp.status_code == 200, resp.text
        choice = resp.json()["choices"][0]
        assert (choice["message"]["content"], choice["finish_reason"]) == (STOPPED_REPLY, "stop")
        assert (await run.ask("carry on")).json()["choices"][0]["message"]["content"] == "echo: carry on"
    assert rows(run.db_path, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "a long task"), ("user", "carry on"), ("assistant", "echo: carry on")]


async def _post_raw(run: Running, body: bytes) -> httpx.Response:
    return await run.http.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})


async def test_a_lone_surrogate_is_refused_and_leaves_nothing(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        # Valid JSON, but not text: half of an emoji's surrogate pair.
        in_text = await _post_raw(run, b'{"messages": [{"role": "user", "content": "hi \\ud83d"}], "user": "bob"}')
        assert error_of(in_text, 400)["code"] == "invalid_unicode"
        in_user = await _post_raw(run, b'{"messages": [{"role": "user", "content": "hi"}], "user": "b\\udc00b"}')
        assert error_of(in_user, 400)["code"] == "invalid_unicode"
        in_key = await run.http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                                     headers={"Idempotency-Key": b"k-\xff"})
        assert "Idempotency-Key" in error_of(in_key, 400)["message"]
        # A whole pair is an emoji, and fine.
        ok = await _post_raw(run, b'{"messages": [{"role": "user", "content": "hi \\ud83d\\ude00"}], "user": "bob"}')
        assert ok.json()["choices"][0]["message"]["content"] == "echo: hi \U0001f600"
    assert rows(run.db_path, "SELECT COUNT(*) FROM sessions") == [(1,)]
    assert rows(run.db_path, "SELECT content FROM messages WHERE role = 'user'") == [("hi \U0001f600",)]
    assert len(fake_openai.chat_requests) == 1


async def test_a_platform_message_with_a_broken_id_is_refused_before_anything_is_stored(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    """Adapters clean message text; an id they pass on as it came is caught by the router."""
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat,
                           env={"TESTCHAT_ALLOWED_USERS": "u1"}) as run:
        await chat.say("hello", user="u1", chat="room\ud800", chat_type=ChatType.GROUP)
        (notice,) = await chat.wait_sent(1)
        assert "not valid Unicode" in notice.text and notice.error is not None and notice.error.status == 400
    assert rows(run.db_path, "SELECT COUNT(*) FROM sessions") == [(0,)]
    assert rows(run.db_path, "SELECT COUNT(*) FROM gateway_session_index") == [(0,)]
    assert fake_openai.chat_requests == []


async def test_user_ids_differing_only_by_surrounding_whitespace_are_one_chat(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        for user in ("alice", " alice", "alice\t", "\u3000alice\n"):
            assert (await run.ask(f"from {user!r}", user=user)).status_code == 200
    assert rows(run.db_path, "SELECT session_key FROM gateway_session_index") == [("agent:main:api-server:dm:alice",)]
    assert rows(run.db_path, "SELECT COUNT(*) FROM sessions") == [(1,)]


async def test_a_broken_model_connection_is_not_described_with_the_librarys_text(
    gateway_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model server that cuts its answer short: the caller hears that, not ``ContentLengthError``."""

    async def cut_short(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"ch")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(cut_short, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with run_gateway(gateway_home, f"http://127.0.0.1:{port}/v1") as run:
            error = error_of(await run.ask("hi"), 502)
    finally:
        server.close()
        await server.wait_closed()
    assert "ContentLengthError" not in error["message"] and "payload" not in error["message"].lower()
    assert "could not be reached, or cut the answer off" in error["message"]
    assert "ContentLengthError" in capsys.readouterr().out  # the log keeps the detail


async def test_titles_are_logged_at_debug_level_only(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    """A session's title says what the conversation is about: user content, kept out of info logs."""
    title = "Secret Lisbon Surprise Party"
    async with run_gateway(gateway_home, fake_openai.base_url, config={"agent": {"auto_title": True}}) as run:
        with structlog.testing.capture_logs() as events:
            fake_openai.reply("happy to help")  # the answer; the title request comes after it
            fake_openai.reply(title)
            assert (await run.ask("plan a surprise party in Lisbon")).status_code == 200
            async with asyncio.timeout(WAIT):
                while rows(run.db_path, "SELECT title FROM sessions") != [(title,)]:
                    await asyncio.sleep(0.02)
                while not any(e["event"] == "agent.titled" for e in events):
                    await asyncio.sleep(0.02)
    telling = [e for e in events if title in str(e.values())]
    assert telling and {e["log_level"] for e in telling} == {"debug"}
