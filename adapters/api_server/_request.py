"""What a ``/v1/chat/completions`` request asks, refused with an OpenAI-style error when it cannot be
taken as it is; and that error shape itself."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..base import ChatType, InboundMessage

__all__ = ["MAX_BODY_BYTES", "MAX_USER_CHARS", "ChatRequest", "error_body", "error_response", "parse_request"]

MAX_BODY_BYTES = 1024 * 1024
MAX_USER_CHARS = 128


@dataclass(frozen=True)
class ChatRequest:
    message: InboundMessage
    stream: bool  # ``stream: true``
    include_usage: bool  # ``stream_options.include_usage: true``


def error_body(message: str, err_type: str, code: str | None) -> dict[str, Any]:
    """An error as the OpenAI API words one (in a response body, or an SSE event of a stream)."""
    return {"error": {"message": message, "type": err_type, "param": None, "code": code}}


def error_response(status: int, message: str, err_type: str = "invalid_request_error", code: str | None = None, *,
                   retry_after: float | None = None) -> web.Response:
    """An error as the OpenAI API answers one: ``{"error": {"message", "type", "param", "code"}}``."""
    headers = {"Retry-After": str(max(1, math.ceil(retry_after)))} if retry_after else None
    return web.json_response(error_body(message, err_type, code), status=status, headers=headers)


def _too_large() -> web.Response:
    return error_response(413, f"Request body larger than {MAX_BODY_BYTES} bytes.", code="request_too_large")


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


async def parse_request(request: web.Request, platform: str, model_name: str,
                        any_model: bool) -> ChatRequest | web.Response:
    """The request as an inbound message of ``platform``, or the error response that refuses it; a
    refused request reaches nothing behind it. ``any_model``: take whatever ``model`` it names."""
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        return _too_large()
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return _too_large()
    if len(raw) > MAX_BODY_BYTES:
        return _too_large()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
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
    text = _last_user_text(body.get("messages"))
    if text is None:
        return error_response(400, "'messages' must be a list containing at least one user message with text.",
                              code="invalid_messages")
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
    )
    return ChatRequest(msg, body.get("stream") is True, include_usage)
