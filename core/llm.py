"""A client for OpenAI-compatible ``/chat/completions`` endpoints, with retries.

One ``ModelClient`` is shared by every conversation of the daemon; it holds a
pooled ``httpx.AsyncClient``. Transient failures (429, 408, 500/502/503/504,
dropped connections, timeouts) are retried with exponential backoff and
jitter, honouring ``Retry-After`` up to ``max_retry_after`` (a longer one fails
the call at once, saying how long to wait); everything else fails at once with an error
from ``core.errors`` that tells the user what to change. The API key is sent
only in the ``Authorization`` header: it never appears in a repr, a log line
or an exception message.

Inside a turn (``core._budget``) attempts and waits share the turn's budget,
``turn_timeout``: an attempt's timeout is clipped to what is left, and a retry
that cannot fit is not started. At most ``max_response_bytes`` of a response
are read; a longer answer comes back cut there, marked by ``ChatResult.cut_at``.

Given an ``AnswerListener`` (and ``model.stream`` on), a call asks for a stream
and hands the listener each piece of text as it arrives (``core._stream``); the
result is the same ``ChatResult`` an unstreamed call returns. A streamed
attempt is not cut at ``timeout`` as a whole (an answer written at 10 tokens a
second may take minutes): each read waits at most ``timeout``, and the whole
stream at most what is left of the turn's budget. A stream that breaks off is
retried like a dropped connection, after ``listener.discard()``; a server that
ignores ``stream`` and answers JSON is read as if nothing had been asked.

How tools reach the model is ``core.toolcalls``'s business, behind this seam: a
model that takes them as text (``model.tool_format``, or learned by ``auto`` when
the server refuses ``tools`` or the model writes a text call) gets them described
in its prompt, and every answer comes back in the OpenAI shape (native
``tool_calls``, ``<think>`` blocks moved to ``reasoning_content``), streamed or not.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Self
from urllib.parse import urlsplit, urlunsplit

import httpx
import structlog

from ._body import INLINE_PARSE_BYTES, parse_json, read_capped
from ._budget import TurnBudget, current_budget
from ._completion import BadCompletion, ChatResult, Usage, parse_completion
from ._failures import Failure, clip, error_field, scrub, status_failure
from ._settings import ModelSettings, display_url
from ._stream import BrokenStream, EventTooLarge, Relay, StreamError, read_stream
from .errors import (
    ModelNotConfiguredError,
    ModelResponseError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from .streaming import AnswerListener
from .toolcalls import StreamGate, ToolFormats, offered_names, rejects_tools, settle_message, text_request

__all__ = ["ChatResult", "ModelClient", "ModelSettings", "Usage", "describe_size", "retry_delay"]

log = structlog.get_logger("hermes.core")

_USER_AGENT = "hermes-gateway/0.1"
# A retry is started only when at least this much of the turn's budget is left after its wait
# (or model.timeout, if that is shorter): an attempt with less can hardly get an answer.
_MIN_ATTEMPT_S = 1.0


class ModelClient:
    """Sends chat completions to ``settings.base_url``; safe to share between tasks."""

    def __init__(self, settings: ModelSettings, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.settings = settings
        #: how each model takes tools, configured or learned, for as long as this client lives
        self.tool_formats = ToolFormats(settings.tool_format, settings.tool_formats)  # type: ignore[arg-type]
        self._endpoint = display_url(settings.base_url) if settings.base_url else "(not configured)"
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
        listener: AnswerListener | None = None,
    ) -> ChatResult:
        """One completion of ``messages`` by ``model`` (default: ``settings.model``).

        ``extra`` is merged into the request body last, for provider-specific
        fields (``tool_choice``, ``reasoning``, ``provider`` ...). With a
        ``listener`` (and ``model.stream`` on) the answer is streamed: the
        listener gets its text as it is written.
        """
        url, model_name = self._target(model)
        fmt = self.tool_formats.of(model_name)
        offered = offered_names(tools)
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
            raise ValueError("ModelClient.chat streams when given a listener; leave 'stream' out of extra")
        relay = None
        if listener is not None and self.settings.stream:  # reviews, flushes and titles never pass one
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
            relay = listener if isinstance(listener, Relay) else Relay(listener)
        if fmt == "text":
            text_request(body)
        try:
            result = await self._send(url, body, relay, calls=bool(offered) and fmt != "native",
                                      refusable=bool(offered) and fmt == "auto")
        except _ToolsRefused:
            self.tool_formats.learn_text(model_name, "the server refused the tools field")
            fmt = "text"
            text_request(body)
            result = await self._send(url, body, relay, calls=True)
        message, found = settle_message(result.message, fmt, offered)
        if message is None:
            return result
        if found and fmt == "auto":
            self.tool_formats.learn_text(model_name, "the model wrote a tool call as text")
        return replace(result, message=message, finish_reason="tool_calls" if found else result.finish_reason)

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

    async def _send(self, url: str, body: dict[str, Any], relay: Relay | None, *, calls: bool = False,
                    refusable: bool = False) -> ChatResult:
        """``calls``: a stream's text is held back where a text tool call may start; ``refusable``: an
        error that says the server takes no tools raises ``_ToolsRefused`` (``auto`` then goes text)."""
        headers = {"Authorization": f"Bearer {self.settings.api_key}"} if self.settings.api_key else {}
        if relay is not None:
            headers["Accept"] = "text/event-stream"
        attempts = self.settings.max_retries + 1
        # The turn's budget (None outside a turn): every attempt and every wait fits in it.
        budget = current_budget()
        for attempt in range(1, attempts + 1):
            if budget is not None and budget.remaining() <= 0:
                raise self._budget_spent(budget, attempt - 1)
            outcome = await self._attempt(url, body, headers, budget, relay, calls, refusable)
            if isinstance(outcome, ChatResult):
                return outcome
            if relay is not None and relay.given:
                relay.discard()  # the text of a failed attempt is no part of any answer
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
            if budget is not None and budget.remaining() - delay < min(_MIN_ATTEMPT_S, self.settings.timeout):
                # A retry that cannot finish inside the turn's budget is not started.
                log.warning(
                    "model.turn_budget_spent",
                    endpoint=self._endpoint,
                    attempt=attempt,
                    reason=outcome.reason,
                    turn_timeout_s=budget.seconds,
                )
                spent = self._budget_spent(budget, attempt) if outcome.reason == "timeout" else outcome.error(attempt)
                raise spent from outcome.cause
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

    async def _attempt(self, url: str, body: dict[str, Any], headers: dict[str, str], budget: TurnBudget | None,
                       relay: Relay | None, calls: bool, refusable: bool) -> ChatResult | Failure:
        timeout = self.settings.timeout
        # httpx's timeouts are per read; this caps a server that trickles bytes forever. A stream
        # trickles by design: only the turn's budget caps it.
        limit = self.settings.turn_timeout if relay is not None else timeout + self.settings.connect_timeout
        left = budget.remaining() if budget is not None else limit
        scope = asyncio.timeout(min(limit, left))
        try:
            async with scope:
                request = self._http.build_request("POST", url, json=body, headers=headers)
                response = await self._http.send(request, stream=True)
                try:
                    if relay is not None and response.is_success and _is_event_stream(response):
                        return await self._read_stream(response, relay, calls)
                    raw, cut = await read_capped(response, self.settings.max_response_bytes)
                finally:
                    await response.aclose()
        except httpx.ConnectTimeout as exc:
            reason = f"no connection within {self.settings.connect_timeout:g}s"
            return self._unreachable(reason, exc)
        except (httpx.TimeoutException, TimeoutError) as exc:
            cut_short = relay is None or scope.expired()  # a stream's per-read timeout is worth a retry
            if budget is not None and left < limit and cut_short:  # the turn's budget ran out: no retry fits
                spent = budget
                return Failure(False, "timeout", lambda n: self._budget_spent(spent, n), cause=exc)
            return Failure(
                True, "timeout", lambda n: ModelTimeoutError(self._endpoint, n, timeout), cause=exc
            )
        except httpx.TransportError as exc:
            return self._unreachable(self._scrub(str(exc)) or type(exc).__name__, exc)
        except httpx.HTTPError as exc:  # undecodable content-encoding and the like
            problem = f"sent a response that could not be read ({type(exc).__name__})"
            return Failure(False, problem, lambda n: ModelResponseError(self._endpoint, problem), cause=exc)
        if response.is_success:
            return await self._interpret_success(response.headers, raw, cut)
        payload = _json_or_none(raw)
        if refusable and rejects_tools(payload):
            raise _ToolsRefused
        return self._status_failure(response.status_code, response.headers, payload)

    def _budget_spent(self, budget: TurnBudget, attempts: int) -> ModelTimeoutError:
        return ModelTimeoutError(self._endpoint, attempts, self.settings.timeout, turn_timeout=budget.seconds)

    def _unreachable(self, reason: str, exc: BaseException) -> Failure:
        return Failure(
            True,
            type(exc).__name__,
            lambda n: ModelUnavailableError(self._endpoint, n, reason=clip(reason)),
            cause=exc,
        )

    async def _read_stream(self, response: httpx.Response, relay: Relay, calls: bool) -> ChatResult | Failure:
        # Text that may be a tool call or reasoning is held back from the person (core.toolcalls).
        gate = StreamGate(relay.text, relay.discard, calls=calls)
        try:
            streamed = await read_stream(response.aiter_bytes(), self.settings.max_response_bytes, gate.feed)
            gate.close()
        except StreamError as exc:  # a provider's failure reported inside the 2xx stream, as in a 2xx body
            return self._error_in_body(response.headers, exc.payload)
        except EventTooLarge:
            return self._too_large()
        except BrokenStream as exc:
            problem = f"its stream broke off: {exc}"
            return Failure(True, "stream broke", lambda n: ModelUnavailableError(self._endpoint, n, reason=problem),
                           cause=exc)
        return self._completion(streamed.completion, streamed.cut)

    async def _interpret_success(self, headers: httpx.Headers, raw: bytearray, cut: bool) -> ChatResult | Failure:
        try:
            # A large body is parsed in steps, so other chats' turns go on meanwhile (core/_body.py).
            payload = await parse_json(raw, cut=cut)
        except (ValueError, RecursionError):
            payload = None
        if cut and not isinstance(payload, dict):
            return self._too_large()
        if not isinstance(payload, dict):
            start = clip(self._scrub(raw[:200].decode("utf-8", "replace")), 80)
            problem = f"answered with something that is not a JSON object (it starts with {start!r})"
            hint = "Check that model.base_url points at an OpenAI-compatible API (it usually ends in /v1)."
            return Failure(False, "not JSON", lambda n: ModelResponseError(self._endpoint, problem, hint=hint))
        if payload.get("error") and not payload.get("choices"):
            # Some gateways (OpenRouter, LiteLLM) report upstream failures inside a 200.
            return self._error_in_body(headers, payload)
        return self._completion(payload, cut)

    def _error_in_body(self, headers: httpx.Headers, payload: dict[str, Any]) -> Failure:
        code = error_field(payload, "code")
        status = code if isinstance(code, int) and 400 <= code <= 599 else 502
        return self._status_failure(status, headers, payload)

    def _completion(self, payload: dict[str, Any], cut: bool) -> ChatResult | Failure:
        try:
            result = parse_completion(payload)
        except BadCompletion as exc:
            if cut:
                return self._too_large()
            problem = f"sent a malformed chat completion: {exc}"
            return Failure(False, "malformed", lambda n: ModelResponseError(self._endpoint, problem))
        if not cut:
            return result
        cap = self.settings.max_response_bytes
        log.warning("model.answer_cut", endpoint=self._endpoint, max_response_bytes=cap)
        return replace(result, cut_at=cap)

    def _too_large(self) -> Failure:
        size = describe_size(self.settings.max_response_bytes)
        problem = f"sent an answer longer than {size} that could not be used once cut there"
        hint = "Ask for a shorter answer, or raise model.max_response_bytes in config.yaml."
        return Failure(False, "too large", lambda n: ModelResponseError(self._endpoint, problem, hint=hint))

    def _status_failure(self, status: int, headers: httpx.Headers, payload: Any) -> Failure:
        return status_failure(status, headers, payload, endpoint=self._endpoint, timeout=self.settings.timeout,
                              api_key=self.settings.api_key)

    def _scrub(self, text: str) -> str:
        return scrub(text, self.settings.api_key)


class _ToolsRefused(Exception):
    """The server said it takes no ``tools`` (``auto``: the request goes again, as text); never leaves the client."""


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


def describe_size(size: int) -> str:
    """``"4 MB"``, ``"640 KB"``: a byte count as a person reads it (binary units)."""
    if size >= 2**20:
        return f"{size / 2**20:.3g} MB"
    return f"{size / 2**10:.3g} KB"


def _is_event_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.lower().startswith("text/event-stream")


def _json_or_none(content: bytearray) -> Any:
    """The JSON of an error body; one larger than a provider's error object is not read as one."""
    if len(content) > INLINE_PARSE_BYTES:
        return None
    try:
        return json.loads(content)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both
        return None
