"""A client for OpenAI-compatible ``/chat/completions`` endpoints, with retries.

One ``ModelClient`` is shared by every conversation of the daemon; it holds a
pooled ``httpx.AsyncClient``. Transient failures (429, 408, 500/502/503/504,
dropped connections, timeouts) are retried with exponential backoff and
jitter, honouring ``Retry-After`` up to ``max_retry_after`` (a longer one fails
the call at once, saying how long to wait); everything else fails at once with an error
from ``core.errors`` that tells the user what to change. The API key is sent
only in the ``Authorization`` header: it never appears in a repr, a log line
or an exception message.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from functools import partial
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import httpx
import structlog

from .errors import (
    ModelAuthError,
    ModelContextLengthError,
    ModelError,
    ModelNotConfiguredError,
    ModelRateLimitError,
    ModelResponseError,
    ModelTimeoutError,
    ModelUnavailableError,
)

log = structlog.get_logger("hermes.core")

_USER_AGENT = "hermes-gateway/0.1"
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
# Reasoning fields that must be kept on the assistant message so they can be replayed.
_REASONING_KEYS = ("reasoning", "reasoning_content", "reasoning_details")


@dataclass(frozen=True)
class ModelSettings:
    """``model.*`` in config.yaml. Timeouts and backoff are in seconds."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    auxiliary_model: str | None = None
    timeout: float = 120.0
    connect_timeout: float = 10.0
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 20.0
    #: the longest Retry-After the client waits out; a longer one fails the call at once
    max_retry_after: float = 90.0

    def __post_init__(self) -> None:
        if not self.timeout > 0 or not self.connect_timeout > 0:
            raise ValueError("model.timeout and model.connect_timeout must be greater than 0")
        if self.max_retries < 0:
            raise ValueError("model.max_retries must be 0 or more")
        if self.backoff_base < 0 or self.backoff_max < 0:
            raise ValueError("model.backoff_base and model.backoff_max must be 0 or more")
        if self.max_retry_after < 0:
            raise ValueError("model.max_retry_after must be 0 or more")

    @property
    def configured(self) -> bool:
        """True when there is an endpoint and a default model to send to it."""
        return bool(self.base_url and self.model)

    def __repr__(self) -> str:
        # Says whether a key is set (useful when debugging config) without showing it.
        shown = []
        for f in fields(self):
            if f.name == "api_key":
                shown.append(f"api_key={'<set>' if self.api_key else None}")
            elif f.name == "base_url" and self.base_url:
                shown.append(f"base_url={_display_url(self.base_url)!r}")
            else:
                shown.append(f"{f.name}={getattr(self, f.name)!r}")
        return f"ModelSettings({', '.join(shown)})"


@dataclass(frozen=True)
class Usage:
    """Token counts of one completion (0 when the provider did not report them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def session_columns(self) -> dict[str, int]:
        """What this one call adds to a session's usage columns in state.db."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "api_call_count": 1,
        }

    @classmethod
    def from_openai(cls, usage: object) -> Usage:
        """Map an OpenAI ``usage`` object, tolerating Anthropic-style cache fields and gaps."""
        if not isinstance(usage, Mapping):
            return cls()
        prompt_details = usage.get("prompt_tokens_details")
        completion_details = usage.get("completion_tokens_details")
        return cls(
            input_tokens=_count(usage, "prompt_tokens", "input_tokens"),
            output_tokens=_count(usage, "completion_tokens", "output_tokens"),
            cache_read_tokens=_count(prompt_details, "cached_tokens") or _count(usage, "cache_read_input_tokens"),
            cache_write_tokens=_count(usage, "cache_creation_input_tokens")
            or _count(prompt_details, "cache_write_tokens"),
            reasoning_tokens=_count(completion_details, "reasoning_tokens"),
        )


@dataclass(frozen=True)
class ChatResult:
    """One completion: the assistant message in OpenAI format, ready to append to history."""

    message: dict[str, Any]
    finish_reason: str | None
    usage: Usage
    model: str | None
    raw: dict[str, Any] = field(repr=False)

    @property
    def content(self) -> str | None:
        content = self.message.get("content")
        return content if isinstance(content, str) else None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        calls = self.message.get("tool_calls")
        return list(calls) if isinstance(calls, list) else []


@dataclass(frozen=True)
class _Failure:
    """One failed attempt: whether another may help, and the error to raise if not."""

    retryable: bool
    reason: str  # short, for the retry log line
    error: Callable[[int], ModelError]  # attempts made -> the error to raise
    retry_after: float | None = None
    cause: BaseException | None = None


class ModelClient:
    """Sends chat completions to ``settings.base_url``; safe to share between tasks."""

    def __init__(self, settings: ModelSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        self._endpoint = _display_url(settings.base_url) if settings.base_url else "(not configured)"
        self._http = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(settings.timeout, connect=settings.connect_timeout),
            headers={"User-Agent": _USER_AGENT, "Accept": "application/json"},
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> ChatResult:
        """One completion of ``messages`` by ``model`` (default: ``settings.model``).

        ``extra`` is merged into the request body last, for provider-specific
        fields (``tool_choice``, ``reasoning``, ``provider`` ...).
        """
        url, model_name = self._target(model)
        body: dict[str, Any] = {"model": model_name, "messages": [dict(m) for m in messages]}
        if tools:
            body["tools"] = [dict(t) for t in tools]
        if temperature is not None:
            body["temperature"] = temperature
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if extra:
            body.update(extra)
        if body.get("stream"):
            raise ValueError("ModelClient.chat does not stream; leave 'stream' out of extra")
        return await self._send(url, body)

    # ------------------------------------------------------------------ internals

    def _target(self, model: str | None) -> tuple[str, str]:
        base_url, model_name = self.settings.base_url, model or self.settings.model
        missing = [name for name, value in (("model.base_url", base_url), ("model.default", model_name)) if not value]
        if missing or base_url is None or model_name is None:
            raise ModelNotConfiguredError(missing=missing)
        try:
            parts = urlsplit(base_url)
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ModelNotConfiguredError(
                f"model.base_url {self._endpoint!r} is not an http(s) URL like http://127.0.0.1:8080/v1: "
                "fix it in config.yaml or in the HERMES_MODEL_BASE_URL environment variable."
            )
        path = parts.path.rstrip("/") + "/chat/completions"
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, "")), model_name

    async def _send(self, url: str, body: dict[str, Any]) -> ChatResult:
        headers = {"Authorization": f"Bearer {self.settings.api_key}"} if self.settings.api_key else {}
        attempts = self.settings.max_retries + 1
        for attempt in range(1, attempts + 1):
            outcome = await self._attempt(url, body, headers)
            if isinstance(outcome, ChatResult):
                return outcome
            if not outcome.retryable or attempt == attempts:
                raise outcome.error(attempt) from outcome.cause
            delay = retry_delay(self.settings, attempt, outcome.retry_after)
            if delay is None:
                # Waiting that long would hold the user's turn hostage; the error says when to try again.
                log.warning(
                    "model.retry_after_too_long",
                    endpoint=self._endpoint,
                    attempt=attempt,
                    reason=outcome.reason,
                    retry_after_s=outcome.retry_after,
                    max_retry_after_s=self.settings.max_retry_after,
                )
                raise outcome.error(attempt) from outcome.cause
            log.warning(
                "model.retry",
                endpoint=self._endpoint,
                attempt=attempt,
                attempts=attempts,
                reason=outcome.reason,
                delay_s=round(delay, 3),
                retry_after_s=outcome.retry_after,
            )
            await asyncio.sleep(delay)
        raise AssertionError("unreachable: the last attempt always returns or raises")

    async def _attempt(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> ChatResult | _Failure:
        timeout = self.settings.timeout
        try:
            # httpx's timeouts are per read; this caps a server that trickles bytes forever.
            async with asyncio.timeout(timeout + self.settings.connect_timeout):
                response = await self._http.post(url, json=body, headers=headers)
        except httpx.ConnectTimeout as exc:
            reason = f"no connection within {self.settings.connect_timeout:g}s"
            return self._unreachable(reason, exc)
        except (httpx.TimeoutException, TimeoutError) as exc:
            return _Failure(
                True, "timeout", lambda n: ModelTimeoutError(self._endpoint, n, timeout), cause=exc
            )
        except httpx.TransportError as exc:
            return self._unreachable(self._scrub(str(exc)) or type(exc).__name__, exc)
        except httpx.HTTPError as exc:  # undecodable content-encoding and the like
            problem = f"sent a response that could not be read ({type(exc).__name__})"
            return _Failure(False, problem, lambda n: ModelResponseError(self._endpoint, problem), cause=exc)
        if response.is_success:
            return self._interpret_success(response)
        return self._status_failure(response.status_code, response.headers, _json_or_none(response.content))

    def _unreachable(self, reason: str, exc: BaseException) -> _Failure:
        return _Failure(
            True,
            type(exc).__name__,
            lambda n: ModelUnavailableError(self._endpoint, n, reason=_clip(reason)),
            cause=exc,
        )

    def _interpret_success(self, response: httpx.Response) -> ChatResult | _Failure:
        payload = _json_or_none(response.content)
        if not isinstance(payload, dict):
            start = _clip(self._scrub(response.content[:200].decode("utf-8", "replace")), 80)
            problem = f"answered with something that is not a JSON object (it starts with {start!r})"
            hint = "Check that model.base_url points at an OpenAI-compatible API (it usually ends in /v1)."
            return _Failure(False, "not JSON", lambda n: ModelResponseError(self._endpoint, problem, hint=hint))
        if payload.get("error") and not payload.get("choices"):
            # Some gateways (OpenRouter, LiteLLM) report upstream failures inside a 200.
            code = _error_field(payload, "code")
            status = code if isinstance(code, int) and 400 <= code <= 599 else 502
            return self._status_failure(status, response.headers, payload)
        try:
            return _parse_completion(payload)
        except _BadCompletion as exc:
            problem = f"sent a malformed chat completion: {exc}"
            return _Failure(False, "malformed", lambda n: ModelResponseError(self._endpoint, problem))

    def _status_failure(self, status: int, headers: httpx.Headers, payload: Any) -> _Failure:
        endpoint, reason = self._endpoint, f"HTTP {status}"
        detail = _clip(self._scrub(_provider_message(payload)))
        if status in (401, 403):
            return _Failure(False, reason, lambda n: ModelAuthError(status, endpoint))
        if status in _RETRY_STATUSES:
            retry_after = _retry_after(headers)
            error: Callable[[int], ModelError]
            if status == 429:
                error = partial(ModelRateLimitError, endpoint, retry_after=retry_after, detail=detail)
            elif status == 408:
                error = partial(ModelTimeoutError, endpoint, timeout=self.settings.timeout)
            else:
                error = partial(ModelUnavailableError, endpoint, status=status, retry_after=retry_after)
            return _Failure(True, reason, error, retry_after=retry_after)
        if status >= 500:
            return _Failure(False, reason, lambda n: ModelUnavailableError(endpoint, n, status=status))
        if 400 <= status < 500 and _is_context_overflow(payload, detail):
            return _Failure(False, reason, lambda n: ModelContextLengthError(endpoint, detail, status=status))
        said = f": {detail}" if detail else ""
        if status == 404:
            problem = f"has no chat completions endpoint or no such model (HTTP 404{said})"
            hint = "Check model.base_url (it usually ends in /v1) and the model name."
        elif 300 <= status < 400:
            where = self._scrub(headers.get("location", "")) or "another address"
            problem = f"redirected the request to {where} (HTTP {status})"
            hint = "Set model.base_url to the final address."
        else:
            problem = f"rejected the request (HTTP {status}{said})"
            hint = ""
        return _Failure(False, reason, lambda n: ModelResponseError(endpoint, problem, status=status, hint=hint))

    def _scrub(self, text: str) -> str:
        key = self.settings.api_key
        return text.replace(key, "***") if key else text


def retry_delay(settings: ModelSettings, attempt: int, retry_after: float | None) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``; None when the server asks for longer than we wait.

    A Retry-After is honoured as given (waiting less only earns another refusal),
    up to ``max_retry_after``; without one, exponential backoff with jitter up to
    ``backoff_max``.
    """
    if retry_after is not None:
        return retry_after if retry_after <= settings.max_retry_after else None
    ceiling = min(settings.backoff_max, settings.backoff_base * 2.0 ** min(attempt - 1, 30))
    # "Equal jitter": at least half the backoff, so clients that failed together spread out.
    return ceiling / 2 + random.uniform(0, ceiling / 2)


class _BadCompletion(Exception):
    """A 2xx body that is JSON but not a usable chat completion."""


def _parse_completion(payload: dict[str, Any]) -> ChatResult:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _BadCompletion("it has no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise _BadCompletion("the first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise _BadCompletion("the message content is neither text nor a list of parts")
    out: dict[str, Any] = {"role": "assistant", "content": content}
    if message.get("tool_calls"):
        out["tool_calls"] = _normalize_tool_calls(message["tool_calls"])
    for key in _REASONING_KEYS:
        if message.get(key):
            out[key] = message[key]
    finish_reason = choice.get("finish_reason")
    model = payload.get("model")
    return ChatResult(
        message=out,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
        usage=Usage.from_openai(payload.get("usage")),
        model=model if isinstance(model, str) else None,
        raw=payload,
    )


def _normalize_tool_calls(calls: object) -> list[dict[str, Any]]:
    """Tool calls in strict OpenAI shape, so the history can be replayed to any provider.

    Unknown keys are kept (Gemini puts thought signatures there); a missing id is
    invented (some local servers omit it) and object arguments are serialised.
    """
    if not isinstance(calls, list):
        raise _BadCompletion("tool_calls is not a list")
    normalized = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise _BadCompletion("a tool call has no function name")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = call.get("id")
        normalized.append(
            {
                **call,
                "id": call_id if isinstance(call_id, str) and call_id else f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {**function, "arguments": arguments},
            }
        )
    return normalized


def _count(mapping: object, *keys: str) -> int:
    """The first non-negative integer among ``keys`` of ``mapping``, else 0."""
    if not isinstance(mapping, Mapping):
        return 0
    for key in keys:
        value = mapping.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both
        return None


def _error_field(payload: Any, key: str) -> Any:
    error = payload.get("error") if isinstance(payload, dict) else None
    return error.get(key) if isinstance(error, dict) else None


def _provider_message(payload: Any) -> str:
    """The human part of an error body: ``error.message``, ``error``, ``message`` or ``detail``."""
    if not isinstance(payload, dict):
        return ""
    for candidate in (_error_field(payload, "message"), payload.get("error"), payload.get("message")):
        if isinstance(candidate, str) and candidate:
            return candidate
    detail = payload.get("detail")
    return detail if isinstance(detail, str) else ""


def _is_context_overflow(payload: Any, detail: str) -> bool:
    code = " ".join(str(_error_field(payload, key) or "") for key in ("code", "type"))
    text = f"{detail} {code}".lower()
    return any(marker in text for marker in _CONTEXT_MARKERS)


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


def _display_url(url: str) -> str:
    """``url`` without credentials or query string (both may hold secrets), for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(invalid URL)"
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _clip(text: str, limit: int = _DETAIL_LIMIT) -> str:
    """``text`` on one line, cut to ``limit`` characters (the cut is marked)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
