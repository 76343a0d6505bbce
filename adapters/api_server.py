"""The local HTTP API: an OpenAI-compatible front door to the gateway.

``POST /v1/chat/completions``: the request's ``user`` names the chat (session
key ``agent:main:api-server:dm:<user>``); only the last user message is new
input — history comes from state.db, never from the request. ``GET
/v1/models``. A bearer key (``API_SERVER_KEY``) is checked when configured
and required when bound beyond loopback. Requests wait for their answer.

It answers as the OpenAI API does: a failure is an HTTP status with an error
object (``{"error": {"message", "type", "param", "code"}}``, and Retry-After
where waiting helps), taken from the error the gateway attached to its notice;
``usage`` is the turn's token counts. A request with an ``Idempotency-Key``
that is sent again gets the first one's answer (the gateway keeps it, across
restarts), and a turn stopped with /stop still answers its request.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import math
import time
import uuid
from typing import Any, ClassVar

from aiohttp import web
from pydantic import Field, SecretStr

from .base import (
    Adapter,
    ChatType,
    Disposition,
    InboundMessage,
    OutboundMessage,
    SendKind,
    SendResult,
    TokenUsage,
)
from .settings import EnvSection

MAX_BODY_BYTES = 1024 * 1024
MAX_USER_CHARS = 128


class ApiServerSettings(EnvSection):
    """``platforms.api_server``; every key can also be set as ``API_SERVER_<KEY>``. The host and
    port are those of the daemon's one HTTP server (webhooks, health and metrics too)."""

    env_prefix: ClassVar[str] = "API_SERVER_"

    enabled: bool = True
    """Serve ``/v1/chat/completions`` and ``/v1/models``."""
    host: str = "127.0.0.1"
    """Address to listen on; beyond loopback, ``key`` is required."""
    port: int = Field(default=8642, ge=0, le=65535)
    """Port to listen on (0: any free port)."""
    key: SecretStr | None = None
    """Bearer key clients must send (``Authorization: Bearer <key>``)."""
    keepalive_timeout: float = Field(default=15.0, gt=0)
    """Seconds a connection may stay silent before the server closes it: before its first request,
    inside a half-sent header, or between requests."""
    max_connections: int = Field(default=0, ge=0)
    """Open connections at most; one more is answered 503 and closed (0: half the daemon's open-file
    limit, ``ulimit -n``, leaving the other half to state.db, the model and the platforms)."""
    backlog: int = Field(default=1024, ge=1)
    """Connections the kernel queues until the daemon accepts them (at most ``net.core.somaxconn``)."""
    max_request_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    """Largest request body read (API and webhooks); a larger one is answered 413."""


def _error(status: int, message: str, err_type: str = "invalid_request_error", code: str | None = None, *,
           retry_after: float | None = None) -> web.Response:
    """An error as the OpenAI API answers one: ``{"error": {"message", "type", "param", "code"}}``."""
    headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if retry_after else None
    body = {"error": {"message": message, "type": err_type, "param": None, "code": code}}
    return web.json_response(body, status=status, headers=headers)


def _last_user_text(messages: Any) -> str | None:
    if not isinstance(messages, list) or not messages:
        return None
    for msg in reversed(messages):
        if not isinstance(msg, dict) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            return "\n".join(p for p in parts if isinstance(p, str))
        return None
    return None


def _valid_unicode(text: str) -> bool:
    """False for text with a lone UTF-16 surrogate (valid JSON, ``"\\ud800"``, but not text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class ApiServerAdapter(Adapter):
    platform = "api-server"
    max_message_length = 10_000_000
    supports_recovery = False

    def __init__(self, *, key: str | None, model_name: str | None, reply_timeout: float = 900.0) -> None:
        """``model_name``: the model requests may name (None: none is configured, so any name is
        taken and each reply says what to configure)."""
        super().__init__()
        self._key = key
        self._model_name = model_name or "hermes-gateway"
        self._any_model = model_name is None
        self._reply_timeout = reply_timeout
        self._waiting: dict[str, asyncio.Future[OutboundMessage]] = {}
        self._stopped = asyncio.Event()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        # Last: what the two above do not match under /v1 gets an OpenAI-style 404 (or 405).
        app.router.add_route("*", "/v1/{tail:.*}", self._unknown)

    async def connect(self) -> None:
        self._stopped.clear()
        self.ready.set()
        await self._stopped.wait()

    async def disconnect(self) -> None:
        self.ready.clear()
        self._stopped.set()
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(ConnectionResetError("the gateway is shutting down"))

    async def send(self, message: OutboundMessage) -> SendResult:
        if message.kind is SendKind.ACK or message.reply_to is None:
            return SendResult()
        fut = self._waiting.get(message.reply_to)
        if fut is not None and not fut.done():
            fut.set_result(message)
        return SendResult((message.reply_to,))

    # ------------------------------------------------------------------ HTTP

    def _authorized(self, request: web.Request) -> bool:
        if not self._key:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self._key.encode())

    def _unauthorized(self) -> web.Response:
        return _error(401, "Missing or wrong bearer key (Authorization: Bearer <API_SERVER_KEY>).",
                      "authentication_error", "invalid_api_key")

    async def _models(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return self._unauthorized()
        return web.json_response(
            {"object": "list", "data": [{"id": self._model_name, "object": "model", "owned_by": "hermes-gateway"}]}
        )

    async def _unknown(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return self._unauthorized()
        known = {"/v1/chat/completions": "POST", "/v1/models": "GET"}.get(request.path)
        if known is not None:
            return _error(405, f"{request.path} takes {known}, not {request.method}.", code="method_not_allowed")
        return _error(404, f"Invalid URL ({request.method} {request.path}).", code="unknown_url")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return self._unauthorized()
        if not self.ready.is_set():
            return _error(503, "The gateway is not accepting messages right now.", "server_error", "unavailable",
                          retry_after=30)
        parsed = await self._parse(request)
        if isinstance(parsed, web.Response):
            return parsed
        msg, stream, include_usage = parsed
        fut: asyncio.Future[OutboundMessage] = asyncio.get_running_loop().create_future()
        assert msg.message_id is not None
        self._waiting[msg.message_id] = fut
        try:
            disposition = await self.dispatch(msg)
            if disposition is Disposition.DUPLICATE:
                return _error(409, "A request with this Idempotency-Key was already handled.", code="duplicate_request")
            if disposition in (Disposition.REFUSED, Disposition.IGNORED):
                return _error(403, "This request was not accepted.", "permission_error", "refused")
            try:
                answer = await asyncio.wait_for(fut, timeout=self._reply_timeout)
            except TimeoutError:
                return _error(504, "No answer within the time limit; it will be kept in the session.",
                              "server_error", "timeout")
            except ConnectionResetError:
                return _error(503, "The gateway is shutting down; send the message again later.",
                              "server_error", "shutting_down", retry_after=30)
        finally:
            self._waiting.pop(msg.message_id, None)
        if answer.error is not None:
            e = answer.error
            return _error(e.status, answer.text.removeprefix("⚠️ "), e.type, e.code, retry_after=e.retry_after)
        return await self._respond(request, answer, stream, include_usage)

    async def _parse(self, request: web.Request) -> tuple[InboundMessage, bool, bool] | web.Response:
        """The request as an inbound message (with ``stream`` and ``stream_options.include_usage``),
        or the error response that refuses it; a refused request reaches nothing behind it."""
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _error(413, f"Request body larger than {MAX_BODY_BYTES} bytes.", code="request_too_large")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _error(413, f"Request body larger than {MAX_BODY_BYTES} bytes.", code="request_too_large")
        if len(raw) > MAX_BODY_BYTES:
            return _error(413, f"Request body larger than {MAX_BODY_BYTES} bytes.", code="request_too_large")
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return _error(400, "The body must be JSON.", code="invalid_json")
        if not isinstance(body, dict):
            return _error(400, "The body must be a JSON object.", code="invalid_json")
        model = body.get("model")
        if model is not None and model != self._model_name and not self._any_model:
            # As OpenAI does: a client that names a model gets that model or a clear refusal,
            # never another model's answer under the name it asked for.
            shown = json.dumps(model, ensure_ascii=True)[:100]
            return _error(404, f"The model {shown} does not exist here; this gateway serves "
                               f"{self._model_name!r} (GET /v1/models).", code="model_not_found")
        text = _last_user_text(body.get("messages"))
        if text is None:
            return _error(400, "'messages' must be a list containing at least one user message with text.",
                          code="invalid_messages")
        user = body.get("user", "default")
        if not isinstance(user, str) or not user.strip() or len(user) > MAX_USER_CHARS:
            return _error(400, f"'user' must be a non-empty string of at most {MAX_USER_CHARS} characters.",
                          code="invalid_user")
        idem = request.headers.get("Idempotency-Key")
        for name, value in (("'messages'", text), ("'user'", user), ("The Idempotency-Key header", idem or "")):
            if not _valid_unicode(value):
                # Refused, not repaired: the client sent broken text (a split emoji) and can fix it;
                # what the agent answers must be what was asked.
                return _error(400, f"{name} is not valid Unicode text (it holds a lone UTF-16 surrogate, "
                                   "such as \\ud800, or bytes that are not UTF-8).", code="invalid_unicode")
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        # Surrounding whitespace is not part of who is asking: " alice" is alice.
        user = user.strip()
        msg = InboundMessage(
            platform=self.platform,
            chat_id=user,
            chat_type=ChatType.DM,
            user_id=user,
            text=text,
            message_id=uuid.uuid4().hex,
            dedupe_id=f"idem:{user}:{idem}" if idem else None,
            redeliverable=bool(idem),
            pre_authorized=True,
            awaits_answer=True,
        )
        return msg, body.get("stream") is True, include_usage

    async def _respond(self, request: web.Request, reply: OutboundMessage, stream: bool,
                       include_usage: bool) -> web.StreamResponse:
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        answer = reply.text
        counts = reply.usage or TokenUsage()  # a notice or a replayed answer cost no tokens now
        usage = {"prompt_tokens": counts.prompt_tokens, "completion_tokens": counts.completion_tokens,
                 "total_tokens": counts.total_tokens}
        if not stream:
            return web.json_response(
                {
                    "id": completion_id,
                    "object": "chat.completion",
                    "created": created,
                    "model": self._model_name,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
                    ],
                    "usage": usage,
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": self._model_name}
        for delta, finish in (({"role": "assistant", "content": answer}, None), ({}, "stop")):
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await resp.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
        if include_usage:  # as OpenAI streams it: one last chunk without choices
            chunk = {**base, "choices": [], "usage": usage}
            await resp.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
