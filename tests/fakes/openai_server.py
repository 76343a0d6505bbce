"""A scripted OpenAI-compatible server on 127.0.0.1, speaking real HTTP and real JSON.

Tests queue what the next requests get (``reply``, ``reply_tool_calls``,
``fail``, ``respond``, ``delay``, ``hang``, ``break_stream``); once the script
runs out, the ``responder`` answers (by default it echoes the last user message
as ``"echo: <text>"``). ``hold_when`` holds back the requests that match,
whenever they come, until the test lets them go. Every request is recorded in
``requests``.

A request with ``"stream": true`` is answered as OpenAI streams
(``_openai_stream.py``): SSE ``chat.completion.chunk`` events, a token (a word)
a chunk, tool calls in pieces, the usage chunk when ``stream_options.include_usage``
asks for it, then ``data: [DONE]``. The knobs, attributes that may be set at any
time (or given to the constructor):

- ``first_token_delay`` (s, default 0): the headers go out at once, the first chunk after this;
- ``tokens_per_second`` (default None: as fast as the socket takes them): the pace after it;
- ``ignore_stream`` (default False): answer ``stream: true`` with plain JSON, as servers
  that cannot stream do;
- ``refuse_tools`` (default None; ``"ollama"`` or ``"llamacpp"``): a request carrying ``tools``
  gets that server's real refusal (``_openai_local.py``, which also writes the text forms of
  a tool call, ``text_call``), before the script is touched.

``break_stream(text, after=n, mode=...)`` makes the next streamed answer stop after
``n`` tokens: ``"drop"`` the connection, send a ``"malformed"`` chunk, end the body
(``"eof"``) without a finish or ``[DONE]``, or send an ``"error"`` chunk. Each streamed
answer is recorded in ``streams`` (a ``StreamRecord``: chunks sent, how it ended, an
``ended`` event), so a test can see that a client closed a stream it no longer reads.

A chat request's body is recorded whole, so a test sees every content part it carried
(an ``image_url`` part's data URL included; bodies up to 32 MiB are taken).
``POST /v1/audio/transcriptions`` is answered by ``transcriptions`` (``_openai_audio.py``),
which has its own script and record of the form fields and file bytes it got;
``POST /v1/audio/speech`` by ``speech`` (``_openai_speech.py``), which speaks as a real OGG/Opus file.
``served`` (None: any name) is the set of models it serves; a request for another gets OpenAI's 404
``model_not_found`` (``_openai_models.py``), before the script is touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self

from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy

from ._openai_audio import FakeTranscriptions
from ._openai_local import LocalServer, refusal
from ._openai_models import model_list, unknown_model
from ._openai_speech import FakeSpeech
from ._openai_stream import BreakMode, StreamBreak, StreamRecord, write_stream

Responder = Callable[[dict[str, Any]], str]

# A chat request with a few images as data URLs is several MB; aiohttp's default cap is 1 MB.
_MAX_BODY = 32 * 1024 * 1024


def echo_last_user_message(body: dict[str, Any]) -> str:
    """The default responder: ``"echo: <text of the last user message>"``."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return f"echo: {_text_of(message.get('content'))}"
    return "echo: "


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: CIMultiDictProxy[str]
    body: Any  # the decoded JSON body, or None (GET, or a body that is not JSON)


@dataclass(frozen=True)
class _Reply:
    content: str | None
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str = "stop"
    usage: dict[str, Any] | None = None
    extra_message: dict[str, Any] = field(default_factory=dict)
    brk: StreamBreak | None = None


@dataclass(frozen=True)
class _Raw:
    status: int
    body: bytes
    content_type: str
    headers: Mapping[str, str]


@dataclass(frozen=True)
class _Delay:
    seconds: float


class _Hang:
    pass


_Step = _Reply | _Raw | _Delay | _Hang


@dataclass(frozen=True)
class Hold:
    """Requests matching ``matches`` wait until ``release`` is set; ``arrived`` is set by the first."""

    matches: Callable[[dict[str, Any]], bool]
    release: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


class FakeOpenAI:
    """``POST /v1/chat/completions`` (optionally streamed), ``GET /v1/models``,
    ``POST /v1/audio/transcriptions`` and ``POST /v1/audio/speech``."""

    def __init__(
        self,
        *,
        responder: Responder = echo_last_user_message,
        model: str = "fake-model",
        api_key: str | None = None,
        first_token_delay: float = 0.0,
        tokens_per_second: float | None = None,
        ignore_stream: bool = False,
        served: Sequence[str] | None = None,
        refuse_tools: LocalServer | None = None,
    ) -> None:
        self.refuse_tools = refuse_tools
        self.first_token_delay = first_token_delay
        self.tokens_per_second = tokens_per_second
        self.ignore_stream = ignore_stream
        self.streams: list[StreamRecord] = []
        self.responder = responder
        self.model = model
        self.served: set[str] | None = set(served) if served is not None else None
        self.api_key = api_key  # when set, requests without "Bearer <api_key>" get a 401
        self.requests: list[RecordedRequest] = []
        self.transcriptions = FakeTranscriptions()
        self.speech = FakeSpeech()
        self._script: deque[_Step] = deque()
        self._holds: list[Hold] = []
        self._release = asyncio.Event()  # lets hung handlers finish when the server stops
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._calls = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/audio/transcriptions", self._transcription)
        app.router.add_post("/v1/audio/speech", self._speech)
        self._release.clear()
        self._runner = web.AppRunner(app, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("FakeOpenAI is not started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # ------------------------------------------------------------------- script

    def reply(
        self,
        text: str,
        *,
        usage: dict[str, Any] | None = None,
        finish_reason: str = "stop",
        **message_fields: Any,
    ) -> Self:
        """The next request gets ``text``; ``message_fields`` (e.g. ``reasoning_content``) join the message."""
        self._script.append(_Reply(text, None, finish_reason, usage, message_fields))
        return self

    def reply_tool_calls(
        self,
        calls: Sequence[Mapping[str, Any]],
        *,
        content: str | None = None,
        usage: dict[str, Any] | None = None,
    ) -> Self:
        """The next request gets tool calls: ``[{"name": ..., "arguments": {...}}]`` (``id`` optional)."""
        tool_calls: list[dict[str, Any]] = []
        for call in calls:
            arguments = call.get("arguments", {})
            tool_calls.append(
                {
                    "id": call.get("id") or f"call_{len(tool_calls)}_{call['name']}",
                    "type": "function",
                    "function": {
                        "name": call["name"],
                        "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                    },
                }
            )
        self._script.append(_Reply(content, tool_calls, "tool_calls", usage))
        return self

    def break_stream(self, text: str, *, after: int, mode: BreakMode = "drop",
                     error: dict[str, Any] | None = None) -> Self:
        """The next request, if streamed, gets ``after`` tokens of ``text`` and then breaks off by
        ``mode``; ``error`` is the error object of mode ``"error"``. Unstreamed, it gets ``text``."""
        self._script.append(_Reply(text, brk=StreamBreak(mode, after, error)))
        return self

    def fail(self, status: int, body: Any = None, headers: Mapping[str, str] | None = None) -> Self:
        """The next request gets ``status``; ``body`` defaults to an OpenAI-style error object."""
        if body is None:
            body = {"error": {"message": f"fake failure (HTTP {status})", "type": "fake_error", "code": status}}
        return self.respond(status, body, headers)

    def respond(self, status: int, body: Any, headers: Mapping[str, str] | None = None) -> Self:
        """The next request gets exactly this: ``str``/``bytes`` bodies go out as-is, others as JSON."""
        if isinstance(body, bytes):
            raw, content_type = body, "application/octet-stream"
        elif isinstance(body, str):
            raw, content_type = body.encode(), "text/plain"
        else:
            raw, content_type = json.dumps(body).encode(), "application/json"
        self._script.append(_Raw(status, raw, content_type, dict(headers or {})))
        return self

    def delay(self, seconds: float) -> Self:
        """Wait ``seconds`` before sending the next response (scripted or default)."""
        self._script.append(_Delay(seconds))
        return self

    def hold_when(self, matches: Callable[[dict[str, Any]], bool]) -> Hold:
        """Hold back every request whose JSON body ``matches`` until ``release`` of the returned
        ``Hold`` is set; it then takes the script's next step (or the responder's answer).
        Unlike the script, this does not depend on the order requests arrive in."""
        hold = Hold(matches)
        self._holds.append(hold)
        return hold

    def hang(self) -> Self:
        """Never answer the next request (until the server stops): for client timeouts."""
        self._script.append(_Hang())
        return self

    # ----------------------------------------------------------------- handlers

    async def _record(self, request: web.Request) -> RecordedRequest:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        recorded = RecordedRequest(request.method, request.path, CIMultiDictProxy(CIMultiDict(request.headers)), body)
        self.requests.append(recorded)
        return recorded

    def _unauthorized(self, recorded: RecordedRequest) -> web.Response | None:
        if self.api_key is None or recorded.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        error = {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}
        return web.json_response({"error": error}, status=401)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request)
        denied = self._unauthorized(recorded)
        if denied is not None:
            return denied
        return web.json_response(model_list(self.served, self.model))

    async def _transcription(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            await request.read()
            error = {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                     "code": "invalid_api_key"}
            return web.json_response({"error": error}, status=401)
        return await self.transcriptions.handle(request, self._release)

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        if self.api_key is not None and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            await request.read()
            error = {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                     "code": "invalid_api_key"}
            return web.json_response({"error": error}, status=401)
        return await self.speech.handle(request, self._release)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request)
        # A real provider refuses a bad key before anything else: the script is left as it is.
        denied = self._unauthorized(recorded) or unknown_model(self.served, recorded.body)
        if denied is not None:
            return denied
        if self.refuse_tools is not None and isinstance(recorded.body, dict) and recorded.body.get("tools"):
            status, refused = refusal(self.refuse_tools, str(recorded.body.get("model") or self.model))
            return web.json_response(refused, status=status)
        for hold in self._holds:
            if isinstance(recorded.body, dict) and hold.matches(recorded.body):
                hold.arrived.set()
                release = asyncio.ensure_future(hold.release.wait())
                stopped = asyncio.ensure_future(self._release.wait())
                await asyncio.wait({release, stopped}, return_when=asyncio.FIRST_COMPLETED)
                release.cancel()
                stopped.cancel()
        # Take this request's steps now, so requests arriving while it waits get the next ones.
        step, wait = self._next_step(), 0.0
        while isinstance(step, _Delay):
            wait, step = wait + step.seconds, self._next_step()
        if isinstance(step, _Hang):
            await self._release.wait()
            return web.Response(status=504, text="fake server stopped while hanging")
        if wait:
            with contextlib.suppress(TimeoutError):  # stop() cuts delays short too
                await asyncio.wait_for(self._release.wait(), wait)
        body = recorded.body if isinstance(recorded.body, dict) else {}
        if step is None:
            step = _Reply(self.responder(body))
        if isinstance(step, _Raw):
            headers = CIMultiDict(step.headers)
            headers.setdefault("Content-Type", step.content_type)
            return web.Response(status=step.status, body=step.body, headers=headers)
        if body.get("stream") and not self.ignore_stream:
            record = StreamRecord()
            self.streams.append(record)
            return await write_stream(
                request, self._completion(body, step),
                include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
                first_token_delay=self.first_token_delay, tokens_per_second=self.tokens_per_second,
                brk=step.brk, record=record, pause=self._pause)
        return web.json_response(self._completion(body, step))

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):  # stop() cuts pauses short
            await asyncio.wait_for(self._release.wait(), seconds)

    def _next_step(self) -> _Step | None:
        return self._script.popleft() if self._script else None

    def _completion(self, body: dict[str, Any], reply: _Reply) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.content, **reply.extra_message}
        if reply.tool_calls:
            message["tool_calls"] = reply.tool_calls
        return {
            "id": self._completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
            "usage": self._usage(body, reply),
        }

    def _usage(self, body: dict[str, Any], reply: _Reply) -> dict[str, Any]:
        if reply.usage is not None:
            return reply.usage
        # A rough word count is enough for a fake: tests that care script the usage.
        prompt = sum(len(_text_of(m.get("content")).split()) for m in body.get("messages") or [] if isinstance(m, dict))
        completion = len((reply.content or "").split())
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def _completion_id(self) -> str:
        self._calls += 1
        return f"chatcmpl-fake-{self._calls}"


def _text_of(content: Any) -> str:
    """Text of a message ``content``: a string, or a list of ``{"type": "text", "text": ...}`` parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""

