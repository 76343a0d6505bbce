"""``core.llm.ModelClient`` against a real HTTP fake of an OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from core import (
    ChatResult,
    ModelAuthError,
    ModelClient,
    ModelContextLengthError,
    ModelError,
    ModelNotConfiguredError,
    ModelRateLimitError,
    ModelResponseError,
    ModelSettings,
    ModelTimeoutError,
    ModelUnavailableError,
    Usage,
)
from core.llm import retry_delay
from storage.errors import GatewayError
from tests.fakes import FakeOpenAI

SECRET = "sk-test-SECRET-4f9c2a7e1b"
HELLO = [{"role": "user", "content": "hello there"}]

# Tiny backoff so retries cost milliseconds; no test asserts on elapsed time.
FAST = ModelSettings(backoff_base=0.001, backoff_max=0.01)

MakeClient = Callable[..., ModelClient]


@pytest.fixture
async def make_client(fake_openai: FakeOpenAI) -> AsyncIterator[MakeClient]:
    clients: list[ModelClient] = []

    def make(**overrides: Any) -> ModelClient:
        options: dict[str, Any] = {"base_url": fake_openai.base_url, "model": "test-model", **overrides}
        client = ModelClient(replace(FAST, **options))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


# ----------------------------------------------------------------------- replies


async def test_plain_reply(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.reply("Hi! How can I help?")
    result = await make_client().chat(HELLO, temperature=0.2, max_tokens=50)

    assert isinstance(result, ChatResult)
    assert result.message == {"role": "assistant", "content": "Hi! How can I help?"}
    assert result.content == "Hi! How can I help?"
    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    assert result.model == "test-model"
    assert result.raw["object"] == "chat.completion"

    [request] = fake_openai.requests
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.body == {"model": "test-model", "messages": HELLO, "temperature": 0.2, "max_tokens": 50}
    assert "Authorization" not in request.headers  # no key configured, no header


async def test_default_responder_echoes_last_user_message(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "second"},
    ]
    result = await make_client().chat(messages)
    assert result.content == "echo: second"


async def test_custom_responder_and_model_override(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.responder = lambda body: f"{body['model']} saw {len(body['messages'])} messages"
    result = await make_client(model=None).chat(HELLO, model="aux-model")
    assert result.content == "aux-model saw 1 messages"


async def test_bearer_header_only_when_key_set(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    await make_client(api_key=SECRET).chat(HELLO)
    await make_client(api_key="").chat(HELLO)
    assert fake_openai.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert "Authorization" not in fake_openai.requests[1].headers


async def test_tool_calls_parsed(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        }
    ]
    fake_openai.reply_tool_calls(
        [
            {"name": "get_weather", "arguments": {"city": "Paris"}},
            {"name": "get_weather", "arguments": {"city": "Tōkyō"}},
        ]
    )
    result = await make_client().chat(HELLO, tools=tools, extra={"tool_choice": "auto"})

    assert result.finish_reason == "tool_calls"
    assert result.content is None
    assert [call["function"]["name"] for call in result.tool_calls] == ["get_weather", "get_weather"]
    assert [json.loads(call["function"]["arguments"]) for call in result.tool_calls] == [
        {"city": "Paris"},
        {"city": "Tōkyō"},
    ]
    assert all(call["type"] == "function" and call["id"] for call in result.tool_calls)
    assert result.message["tool_calls"] == result.tool_calls
    body = fake_openai.requests[0].body
    assert body["tools"] == tools and body["tool_choice"] == "auto"


async def test_tool_calls_normalized_to_openai_shape(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    # Some local servers omit ids and send arguments as an object.
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"function": {"name": "ls", "arguments": {"path": "/"}}, "extra_content": {"sig": "x"}}],
    }
    fake_openai.respond(200, {"choices": [{"message": message, "finish_reason": "tool_calls"}]})
    [call] = (await make_client().chat(HELLO)).tool_calls
    assert call["id"].startswith("call_")
    assert call["type"] == "function"
    assert json.loads(call["function"]["arguments"]) == {"path": "/"}
    assert call["extra_content"] == {"sig": "x"}  # provider extras survive for replay


async def test_reasoning_kept_on_message(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.reply("42", reasoning_content="6 times 7", reasoning="6 times 7")
    result = await make_client().chat(HELLO)
    assert result.message == {
        "role": "assistant",
        "content": "42",
        "reasoning": "6 times 7",
        "reasoning_content": "6 times 7",
    }


async def test_usage_mapped(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.reply(
        "ok",
        usage={
            "prompt_tokens": 1200,
            "completion_tokens": 80,
            "total_tokens": 1280,
            "prompt_tokens_details": {"cached_tokens": 1000},
            "completion_tokens_details": {"reasoning_tokens": 30},
            "cache_creation_input_tokens": 150,
        },
    )
    usage = (await make_client().chat(HELLO)).usage
    assert usage == Usage(
        input_tokens=1200, output_tokens=80, cache_read_tokens=1000, cache_write_tokens=150, reasoning_tokens=30
    )
    assert usage.total_tokens == 1280


async def test_usage_missing_or_partial(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    message = {"role": "assistant", "content": "ok"}
    fake_openai.respond(200, {"choices": [{"message": message}]})
    fake_openai.respond(200, {"choices": [{"message": message}], "usage": {"prompt_tokens": 5, "cache_read_input_tokens": 3}})
    client = make_client()
    assert (await client.chat(HELLO)).usage == Usage()
    assert (await client.chat(HELLO)).usage == Usage(input_tokens=5, cache_read_tokens=3)


async def test_extra_cannot_turn_on_streaming(make_client: MakeClient) -> None:
    with pytest.raises(ValueError, match="stream"):
        await make_client().chat(HELLO, extra={"stream": True})


# ----------------------------------------------------------------------- retries


async def test_429_with_retry_after_then_success(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.fail(429, headers={"Retry-After": "0"}).reply("finally")
    result = await make_client().chat(HELLO)
    assert result.content == "finally"
    assert len(fake_openai.chat_requests) == 2


async def test_retry_after_http_date_and_ms(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    fake_openai.fail(429, headers={"Retry-After": past})
    fake_openai.fail(429, headers={"retry-after-ms": "1"})
    fake_openai.reply("done")
    result = await asyncio.wait_for(make_client().chat(HELLO), timeout=60)
    assert result.content == "done"
    assert len(fake_openai.chat_requests) == 3


def test_retry_delay_honours_retry_after_past_backoff_max() -> None:
    settings = ModelSettings(backoff_base=0.5, backoff_max=20.0, max_retry_after=90.0)
    assert retry_delay(settings, 1, 45.0) == 45.0  # longer than backoff_max, still what the server asked
    assert retry_delay(settings, 3, 90.0) == 90.0
    assert retry_delay(settings, 1, 0.0) == 0.0
    assert retry_delay(settings, 1, 90.5) is None  # longer than we wait: give up now
    for attempt in (1, 2, 3, 10):
        delay = retry_delay(settings, attempt, None)
        ceiling = min(20.0, 0.5 * 2 ** (attempt - 1))
        assert delay is not None and ceiling / 2 <= delay <= ceiling


async def test_retry_after_longer_than_backoff_max_is_waited_out(fake_openai: FakeOpenAI,
                                                                 make_client: MakeClient) -> None:
    fake_openai.fail(429, headers={"retry-after-ms": "250"}).reply("after the wait")
    with capture_logs() as logs:
        result = await make_client(backoff_max=0.01).chat(HELLO)
    assert result.content == "after the wait"
    (retry,) = [e for e in logs if e["event"] == "model.retry"]
    assert retry["delay_s"] == 0.25 and retry["retry_after_s"] == 0.25


async def test_retry_after_past_the_bound_gives_up_at_once(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.fail(429, {"error": {"message": "Daily quota used up"}}, {"Retry-After": "3600"})
    fake_openai.reply("never sent")
    with pytest.raises(ModelRateLimitError) as caught:
        await make_client(max_retry_after=60).chat(HELLO)
    assert len(fake_openai.chat_requests) == 1
    assert caught.value.attempts == 1 and caught.value.retry_after == 3600
    assert "Wait about 1 hour and try again" in str(caught.value)


async def test_server_error_asking_for_a_long_wait_gives_up_at_once(fake_openai: FakeOpenAI,
                                                                    make_client: MakeClient) -> None:
    fake_openai.fail(503, headers={"Retry-After": "600"})
    with pytest.raises(ModelUnavailableError) as caught:
        await make_client().chat(HELLO)
    assert len(fake_openai.chat_requests) == 1
    assert "try again in about 10 minutes" in str(caught.value)


async def test_429_every_time_is_rate_limit_error(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    for _ in range(3):
        fake_openai.fail(429, {"error": {"message": "Rate limit reached for requests"}}, {"Retry-After": "0"})
    with pytest.raises(ModelRateLimitError) as caught:
        await make_client(max_retries=2).chat(HELLO)
    assert caught.value.attempts == 3
    assert "Rate limit reached" in str(caught.value)
    assert len(fake_openai.chat_requests) == 3


async def test_503_twice_then_success(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.fail(503).fail(503).reply("back")
    result = await make_client().chat(HELLO)
    assert result.content == "back"
    assert len(fake_openai.chat_requests) == 3


async def test_5xx_every_time_is_unavailable(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    for _ in range(2):
        fake_openai.fail(502)
    with pytest.raises(ModelUnavailableError) as caught:
        await make_client(max_retries=1).chat(HELLO)
    assert caught.value.status == 502
    assert "HTTP 502" in str(caught.value)
    assert len(fake_openai.chat_requests) == 2


async def test_error_inside_200_is_retried(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.respond(200, {"error": {"message": "upstream overloaded", "code": 503}}).reply("ok")
    assert (await make_client().chat(HELLO)).content == "ok"
    assert len(fake_openai.chat_requests) == 2


async def test_connection_refused_is_unavailable() -> None:
    async with FakeOpenAI() as server:
        base_url = server.base_url  # the port is free again once the server stops
    async with ModelClient(replace(FAST, base_url=base_url, model="m", max_retries=1)) as client:
        with pytest.raises(ModelUnavailableError) as caught:
            await client.chat(HELLO)
    assert caught.value.attempts == 2
    assert caught.value.status is None
    assert "could not be reached" in str(caught.value)


async def test_hang_is_timeout_after_retries(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.hang().hang()
    with pytest.raises(ModelTimeoutError) as caught:
        await make_client(timeout=0.2, max_retries=1).chat(HELLO)
    assert caught.value.attempts == 2
    assert "model.timeout" in str(caught.value)
    assert len(fake_openai.chat_requests) == 2


async def test_slow_answer_times_out_then_retry_succeeds(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.delay(5).reply("too late").reply("in time")
    result = await make_client(timeout=0.2).chat(HELLO)
    assert result.content == "in time"
    assert len(fake_openai.chat_requests) == 2


# ------------------------------------------------------------------ no retries


async def test_401_is_auth_error_without_leaking_key(make_client: MakeClient) -> None:
    async with FakeOpenAI(api_key="sk-the-right-one") as server:
        settings = replace(FAST, base_url=server.base_url, api_key=SECRET, model="m")
        async with ModelClient(settings) as client:
            with pytest.raises(ModelAuthError) as caught:
                await client.chat(HELLO)
        assert len(server.chat_requests) == 1  # never retried

    error = caught.value
    assert error.status == 401
    assert "model.api_key" in str(error) and "HERMES_MODEL_API_KEY" in str(error)
    for text in (str(error), repr(error), repr(settings), str(settings)):
        assert SECRET not in text
    assert "api_key=<set>" in repr(settings)


async def test_403_is_auth_error(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.fail(403, {"error": {"message": f"key {SECRET} may not use this model"}})
    with pytest.raises(ModelAuthError) as caught:
        await make_client(api_key=SECRET).chat(HELLO)
    assert caught.value.status == 403
    assert SECRET not in str(caught.value)


async def test_400_context_length(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    message = (
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. "
        "Please reduce the length of the messages."
    )
    fake_openai.fail(400, {"error": {"message": message, "type": "invalid_request_error", "code": None}})
    with pytest.raises(ModelContextLengthError) as caught:
        await make_client().chat(HELLO)
    assert "maximum context length is 8192" in str(caught.value)
    assert isinstance(caught.value, ModelError) and isinstance(caught.value, GatewayError)
    assert len(fake_openai.chat_requests) == 1


async def test_400_context_length_by_code(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.fail(400, {"error": {"message": "request too big", "code": "context_length_exceeded"}})
    with pytest.raises(ModelContextLengthError):
        await make_client().chat(HELLO)


async def test_400_includes_provider_message_cut_short(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    long_tail = "x" * 1000
    fake_openai.fail(400, {"error": {"message": f"Invalid value for 'temperature' with key {SECRET} {long_tail}"}})
    with pytest.raises(ModelResponseError) as caught:
        await make_client(api_key=SECRET).chat(HELLO, temperature=9)
    text = str(caught.value)
    assert "HTTP 400" in text and "Invalid value for 'temperature'" in text
    assert long_tail not in text and len(text) < 500
    assert SECRET not in text
    assert caught.value.status == 400
    assert len(fake_openai.chat_requests) == 1


async def test_404_hints_at_base_url(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.fail(404, {"error": {"message": "The model `nope` does not exist"}})
    with pytest.raises(ModelResponseError) as caught:
        await make_client().chat(HELLO)
    assert "does not exist" in str(caught.value) and "model.base_url" in str(caught.value)


async def test_malformed_json(fake_openai: FakeOpenAI, make_client: MakeClient) -> None:
    fake_openai.respond(200, "<html>{not json")
    with pytest.raises(ModelResponseError) as caught:
        await make_client().chat(HELLO)
    assert "not a JSON object" in str(caught.value) and "/v1" in str(caught.value)
    assert len(fake_openai.chat_requests) == 1


@pytest.mark.parametrize(
    "payload",
    [
        {"id": "x", "object": "chat.completion"},
        {"choices": []},
        {"choices": [{"index": 0, "finish_reason": "stop"}]},
        {"choices": [{"message": {"role": "assistant", "tool_calls": [{"function": {}}]}}]},
    ],
)
async def test_unusable_completion(fake_openai: FakeOpenAI, make_client: MakeClient, payload: object) -> None:
    fake_openai.respond(200, payload)
    with pytest.raises(ModelResponseError, match="malformed chat completion"):
        await make_client().chat(HELLO)


# ----------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("settings", "missing"),
    [
        (ModelSettings(), ("model.base_url", "model.default")),
        (ModelSettings(base_url="http://127.0.0.1:9/v1"), ("model.default",)),
        (ModelSettings(model="m", api_key=SECRET), ("model.base_url",)),
    ],
)
async def test_not_configured(settings: ModelSettings, missing: tuple[str, ...]) -> None:
    assert not settings.configured
    async with ModelClient(settings) as client:
        with pytest.raises(ModelNotConfiguredError) as caught:
            await client.chat(HELLO)
    message = str(caught.value)
    assert caught.value.missing == missing
    assert "\n" not in message
    assert "HERMES_MODEL_BASE_URL" in message and "model.base_url" in message
    assert SECRET not in message


def test_not_configured_with_own_message() -> None:
    error = ModelNotConfiguredError("Set model.default first.")
    assert str(error) == "Set model.default first." and error.missing == ()


async def test_base_url_without_scheme_is_not_configured() -> None:
    async with ModelClient(ModelSettings(base_url="localhost:8080/v1", model="m")) as client:
        with pytest.raises(ModelNotConfiguredError, match="not an http"):
            await client.chat(HELLO)


def test_settings_validate_and_hide_credentials() -> None:
    settings = ModelSettings(base_url="http://user:pw@127.0.0.1:8080/v1?key=abc", api_key=SECRET, model="m")
    assert settings.configured
    assert "pw" not in repr(settings) and "key=abc" not in repr(settings) and SECRET not in repr(settings)
    with pytest.raises(ValueError):
        ModelSettings(timeout=0)
    with pytest.raises(ValueError):
        ModelSettings(max_retries=-1)
    with pytest.raises(ValueError):
        ModelSettings(max_retry_after=-1)


async def test_custom_transport(fake_openai: FakeOpenAI) -> None:
    settings = replace(FAST, base_url=fake_openai.base_url + "/", model="m")
    async with ModelClient(settings, transport=httpx.AsyncHTTPTransport(retries=0)) as client:
        assert (await client.chat(HELLO)).content == "echo: hello there"
    assert fake_openai.requests[0].path == "/v1/chat/completions"


# ------------------------------------------------------------------ the fake itself


async def test_fake_lists_models_and_streams(fake_openai: FakeOpenAI) -> None:
    async with httpx.AsyncClient(base_url=fake_openai.base_url) as http:
        models = (await http.get("/models")).json()
        assert [m["id"] for m in models["data"]] == ["fake-model"]

        fake_openai.reply("one two three")
        body = {"model": "m", "messages": HELLO, "stream": True, "stream_options": {"include_usage": True}}
        async with http.stream("POST", "/chat/completions", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            lines = [line async for line in response.aiter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "one two three"
    assert chunks[-1]["usage"]["completion_tokens"] == 3
