"""The local HTTP API: an OpenAI-compatible front door to the gateway.

``POST /v1/chat/completions``: the request's ``user`` names the chat (session
key ``agent:main:api-server:dm:<user>``); only the last user message is new
input — history comes from state.db, never from the request. ``GET
/v1/models``. A bearer key (``API_SERVER_KEY``) is checked when configured
and required when bound beyond loopback. Requests wait for their answer.
"""

from __future__ import annotations

import asyncio
import hmac
import json
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


def _error(status: int, message: str, err_type: str = "invalid_request_error") -> web.Response:
    return web.json_response({"error": {"message": message, "type": err_type}}, status=status)


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


class ApiServerAdapter(Adapter):
    platform = "api-server"
    max_message_length = 10_000_000
    supports_recovery = False

    def __init__(self, *, key: str | None, model_name: str, reply_timeout: float = 900.0) -> None:
        super().__init__()
        self._key = key
        self._model_name = model_name
        self._reply_timeout = reply_timeout
        self._waiting: dict[str, asyncio.Future[str]] = {}
        self._stopped = asyncio.Event()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)

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
            fut.set_result(message.text)
        return SendResult((message.reply_to,))

    # ------------------------------------------------------------------ HTTP

    def _authorized(self, request: web.Request) -> bool:
        if not self._key:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self._key.encode())

    async def _models(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return _error(401, "Missing or wrong bearer key.", "authentication_error")
        return web.json_response(
            {"object": "list", "data": [{"id": self._model_name, "object": "model", "owned_by": "hermes-gateway"}]}
        )

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return _error(401, "Missing or wrong bearer key.", "authentication_error")
        if not self.ready.is_set():
            return _error(503, "The gateway is not accepting messages right now.", "unavailable")
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _error(413, f"Request body larger than {MAX_BODY_BYTES} bytes.")
        try:
            body = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            return _error(400, "The body must be JSON.")
        if not isinstance(body, dict):
            return _error(400, "The body must be a JSON object.")
        text = _last_user_text(body.get("messages"))
        if text is None:
            return _error(400, "'messages' must be a list containing at least one user message with text.")
        user = body.get("user", "default")
        if not isinstance(user, str) or not user.strip() or len(user) > MAX_USER_CHARS:
            return _error(400, f"'user' must be a non-empty string of at most {MAX_USER_CHARS} characters.")
        stream = body.get("stream") is True
        message_id = uuid.uuid4().hex
        idem = request.headers.get("Idempotency-Key")
        msg = InboundMessage(
            platform=self.platform,
            chat_id=user.strip(),
            chat_type=ChatType.DM,
            user_id=user.strip(),
            text=text,
            message_id=message_id,
            dedupe_id=f"idem:{user.strip()}:{idem}" if idem else None,
            redeliverable=bool(idem),
            pre_authorized=True,
        )
        fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._waiting[message_id] = fut
        try:
            disposition = await self.dispatch(msg)
            if disposition is Disposition.DUPLICATE:
                return _error(409, "A request with this Idempotency-Key was already handled.", "conflict")
            if disposition in (Disposition.REFUSED, Disposition.IGNORED):
                return _error(403, "This request was not accepted.", "permission_error")
            try:
                answer = await asyncio.wait_for(fut, timeout=self._reply_timeout)
            except TimeoutError:
                return _error(504, "No answer within the time limit; it will be kept in the session.", "timeout")
            except ConnectionResetError:
                return _error(503, "The gateway is shutting down; send the message again later.", "unavailable")
        finally:
            self._waiting.pop(message_id, None)
        return await self._respond(request, answer, stream)

    async def _respond(self, request: web.Request, answer: str, stream: bool) -> web.StreamResponse:
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
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
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                }
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        base = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": self._model_name}
        for delta, finish in (({"role": "assistant", "content": answer}, None), ({}, "stop")):
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await resp.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp
