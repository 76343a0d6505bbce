"""What a ``/v1/chat/completions`` request asks, refused with an OpenAI-style error when it cannot be
taken as it is; and that error shape itself."""

from __future__ import annotations

import asyncio
import json
import math
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..base import ChatType, InboundMessage
from ._parts import Content, ContentError, read_content

__all__ = ["MAX_BODY_BYTES", "MAX_MEDIA_BYTES", "MAX_USER_CHARS", "ChatRequest", "RequestLimits", "error_body",
           "error_response", "parse_request"]

MAX_BODY_BYTES = 1024 * 1024
MAX_MEDIA_BYTES = 20 * 1024 * 1024
MAX_USER_CHARS = 128
#: a body this large is parsed and its media decoded off the event loop
_OFF_LOOP_BYTES = 256 * 1024


@dataclass(frozen=True)
class RequestLimits:
    """What a request may carry (``platforms.api_server``: ``max_request_bytes``, ``max_media_bytes``,
    ``allow_remote_media``)."""

    max_body_bytes: int = MAX_BODY_BYTES
    max_media_bytes: int = MAX_MEDIA_BYTES
    allow_remote_media: bool = False


@dataclass(frozen=True)
class ChatRequest:
    message: InboundMessage
    stream: bool  # ``stream: true``
    include_usage: bool  # ``stream_options.include_usage: true``


def error_body(message: str, err_type: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    """An error as the OpenAI API words one (in a response body, or an SSE event of a stream)."""
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def error_response(status: int, message: str, err_type: str = "invalid_request_error", code: str | None = None, *,
                   retry_after: float | None = None, param: str | None = None) -> web.Response:
    """An error as the OpenAI API answers one: ``{"error": {"message", "type", "param", "code"}}``."""
    headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if retry_after else None
    return web.json_response(error_body(message, err_type, code, param), status=status, headers=headers)


def _too_large(limit: int) -> web.Response:
    return error_response(413, f"Request body larger than {limit} bytes (platforms.api_server.max_request_bytes).",
                          code="request_too_large")


def _last_user(messages: Any) -> tuple[int, dict[str, Any]] | None:
    """The last user message and its index. Only it is read: the gateway keeps the history itself,
    so earlier messages (and any media in them) are neither used nor checked."""
    if not isinstance(messages, list):
        return None
    for n in range(len(messages) - 1, -1, -1):
        msg = messages[n]
        if isinstance(msg, dict) and msg.get("role") == "user":
            return n, msg
    return None


def _content(body: dict[str, Any], limits: RequestLimits) -> Content:
    """The new message's text and attachments; ``ContentError`` refuses what it carries."""
    last = _last_user(body.get("messages"))
    if last is None:
        raise ContentError(400, "'messages' must be a list containing at least one user message.",
                           "invalid_messages", "messages")
    n, msg = last
    content = read_content(msg.get("content"), where=f"messages[{n}].content",
                           max_media_bytes=limits.max_media_bytes, allow_remote=limits.allow_remote_media)
    if not content.text.strip() and not content.attachments:
        raise ContentError(400, f"messages[{n}] is empty: it needs text, or an image, audio clip or file.",
                           "empty_message", f"messages[{n}].content")
    return content


def _valid_unicode(text: str) -> bool:
    """False for text with a lone UTF-16 surrogate (valid JSON, ``"\\ud800"``, but not text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


async def parse_request(request: web.Request, platform: str, model_name: str, any_model: bool,
                        limits: RequestLimits = RequestLimits()) -> ChatRequest | web.Response:
    """The request as an inbound message of ``platform``, or the error response that refuses it; a
    refused request reaches nothing behind it. ``any_model``: take whatever ``model`` it names."""
    cap = limits.max_body_bytes
    if request.content_length is not None and request.content_length > cap:
        return _too_large(cap)
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _too_large(cap)
    if len(raw) > cap:
        return _too_large(cap)
    # A body with media is megabytes of JSON and base64: read it off the event loop.
    off_loop = len(raw) > _OFF_LOOP_BYTES
    try:
        body = await asyncio.to_thread(json.loads, raw) if off_loop else json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return error_response(400, "The body must be JSON.", code="invalid_json")
    if not isinstance(body, dict):
        return error_response(400, "The body must be a JSON object.", code="invalid_json")
    model = body.get("model")
    if model is not None and model != model_name and not any_model:
        # As OpenAI does: a client that names a model gets that model or a clear refusal,
        # never another model's answer under the name it asked for.
        shown = json.dumps(model, ensure_ascii=True)[:100]
        return error_response(404, f"The model {shown} does not exist here; this gateway serves "
                                   f"{model_name!r} (GET /v1/models).", code="model_not_found")
    try:
        content = await asyncio.to_thread(_content, body, limits) if off_loop else _content(body, limits)
    except ContentError as exc:
        return error_response(exc.status, exc.message, code=exc.code, param=exc.param)
    text = content.text
    user = body.get("user", "default")
    if not isinstance(user, str) or not user.strip() or len(user) > MAX_USER_CHARS:
        return error_response(400, f"'user' must be a non-empty string of at most {MAX_USER_CHARS} characters.",
                              code="invalid_user")
    idem = request.headers.get("Idempotency-Key")
    for name, value in (("'messages'", text), ("'user'", user), ("The Idempotency-Key header", idem or "")):
        if not _valid_unicode(value):
            # Refused, not repaired: the client sent broken text (a split emoji) and can fix it;
            # what the agent answers must be what was asked.
            return error_response(400, f"{name} is not valid Unicode text (it holds a lone UTF-16 surrogate, "
                                       "such as \\ud800, or bytes that are not UTF-8).", code="invalid_unicode")
    options = body.get("stream_options")
    include_usage = isinstance(options, dict) and options.get("include_usage") is True
    # Surrounding whitespace is not part of who is asking: " alice" is alice.
    user = user.strip()
    msg = InboundMessage(
        platform=platform,
        chat_id=user,
        chat_type=ChatType.DM,
        user_id=user,
        text=text,
        message_id=uuid.uuid4().hex,
        dedupe_id=f"idem:{user}:{idem}" if idem else None,
        redeliverable=bool(idem),
        pre_authorized=True,
        awaits_answer=True,
        attachments=content.attachments,
    )
    return ChatRequest(msg, body.get("stream") is True, include_usage)
