"""A failed attempt: whether another may help, and the error that tells the user what to change.

Provider text quoted in an error is scrubbed of the API key and cut short:
error bodies can be whole HTML pages, and some echo the request back.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any

import httpx

from .errors import (
    ModelAuthError,
    ModelContextLengthError,
    ModelError,
    ModelRateLimitError,
    ModelRejectedError,
    ModelResponseError,
    ModelTimeoutError,
    ModelUnavailableError,
)

# Provider text quoted in an error is cut here: error bodies can be whole HTML pages.
_DETAIL_LIMIT = 300
_RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# Phrases providers use for "the prompt does not fit" (OpenAI, vLLM, llama.cpp, OpenRouter, Anthropic).
_CONTEXT_MARKERS = (
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "context size",
    "prompt is too long",
)
_MODEL_CODES = frozenset({"model_not_found", "invalid_model", "unknown_model"})
_UNKNOWN_MODEL = re.compile(
    r"\bmodel\b[^.]{0,120}?\b(not found|does not exist|not exist|is not (?:a )?valid|not available|unknown)"
    r"|\b(unknown|invalid|no such) model\b|\bnot a valid model\b", re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    """One failed attempt: whether another may help, and the error to raise if not."""

    retryable: bool
    reason: str  # short, for the retry log line
    error: Callable[[int], ModelError]  # attempts made -> the error to raise
    retry_after: float | None = None
    cause: BaseException | None = None


def status_failure(status: int, headers: httpx.Headers, payload: Any, *, endpoint: str, timeout: float,
                   api_key: str | None) -> Failure:
    """The failure an HTTP answer other than a usable completion stands for."""
    reason = f"HTTP {status}"
    detail = clip(scrub(_provider_message(payload), api_key))
    if status in (401, 403):
        return Failure(False, reason, lambda n: ModelAuthError(status, endpoint))
    if status in _RETRY_STATUSES:
        retry_after = _retry_after(headers)
        error: Callable[[int], ModelError]
        if status == 429:
            error = partial(ModelRateLimitError, endpoint, retry_after=retry_after, detail=detail)
        elif status == 408:
            error = partial(ModelTimeoutError, endpoint, timeout=timeout)
        else:
            error = partial(ModelUnavailableError, endpoint, status=status, retry_after=retry_after)
        return Failure(True, reason, error, retry_after=retry_after)
    if status >= 500:
        return Failure(False, reason, lambda n: ModelUnavailableError(endpoint, n, status=status))
    if 400 <= status < 500 and _is_context_overflow(payload, detail):
        return Failure(False, reason, lambda n: ModelContextLengthError(endpoint, detail, status=status))
    said = f": {detail}" if detail else ""
    if status in (400, 404) and _is_unknown_model(payload, detail):
        problem = f"does not serve the model that was asked for (HTTP {status}{said})"
        hint = "Choose another model (/model), or check the model name and model.base_url."
        return Failure(False, reason, lambda n: ModelRejectedError(endpoint, problem, status=status, hint=hint))
    if status == 404:
        problem = f"has no chat completions endpoint or no such model (HTTP 404{said})"
        hint = "Check model.base_url (it usually ends in /v1) and the model name."
    elif 300 <= status < 400:
        where = scrub(headers.get("location", ""), api_key) or "another address"
        problem = f"redirected the request to {where} (HTTP {status})"
        hint = "Set model.base_url to the final address."
    else:
        problem = f"rejected the request (HTTP {status}{said})"
        hint = ""
    return Failure(False, reason, lambda n: ModelResponseError(endpoint, problem, status=status, hint=hint))



def error_field(payload: Any, key: str) -> Any:
    error = payload.get("error") if isinstance(payload, dict) else None
    return error.get(key) if isinstance(error, dict) else None


def _provider_message(payload: Any) -> str:
    """The human part of an error body: ``error.message``, ``error``, ``message`` or ``detail``."""
    if not isinstance(payload, dict):
        return ""
    for candidate in (error_field(payload, "message"), payload.get("error"), payload.get("message")):
        if isinstance(candidate, str) and candidate:
            return candidate
    detail = payload.get("detail")
    return detail if isinstance(detail, str) else ""


def _is_context_overflow(payload: Any, detail: str) -> bool:
    code = " ".join(str(error_field(payload, key) or "") for key in ("code", "type"))
    text = f"{detail} {code}".lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


def _is_unknown_model(payload: Any, detail: str) -> bool:
    """OpenAI's ``model_not_found``, and the words vLLM, Ollama, LiteLLM and OpenRouter use for it."""
    code = str(error_field(payload, "code") or "").lower()
    return code in _MODEL_CODES or _UNKNOWN_MODEL.search(detail) is not None


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds the server asked us to wait: ``retry-after-ms`` (OpenAI), or ``Retry-After``."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            seconds = _seconds_until(value) if scale == 1.0 else math.nan
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    return None


def _seconds_until(http_date: str) -> float:
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError):
        return math.nan
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return (when - datetime.now(UTC)).total_seconds()


def scrub(text: str, api_key: str | None) -> str:
    """``text`` with the API key masked: some providers echo the request, headers included."""
    return text.replace(api_key, "***") if api_key else text


def clip(text: str, limit: int = _DETAIL_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters (the cut is marked)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
