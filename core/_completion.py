"""A successful response: the chat completion, parsed into a ``ChatResult`` and its ``Usage``.

The assistant message comes out in strict OpenAI shape whatever the provider
sent, so that the history can be replayed to any other provider.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ModelError

# Reasoning fields that must be kept on the assistant message so they can be replayed.
_REASONING_KEYS = ("reasoning", "reasoning_content", "reasoning_details")


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
    #: the answer was longer than ``model.max_response_bytes`` and was cut there (that many bytes)
    cut_at: int | None = None

    @property
    def content(self) -> str | None:
        content = self.message.get("content")
        return content if isinstance(content, str) else None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        calls = self.message.get("tool_calls")
        return list(calls) if isinstance(calls, list) else []


class BadCompletion(ModelError):
    """A 2xx body that is JSON but not a usable chat completion (the client turns it into a
    ModelResponseError that names the endpoint; it never leaves ``core``)."""


def parse_completion(payload: dict[str, Any]) -> ChatResult:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices:
        raise BadCompletion("it has no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise BadCompletion("the first choice has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str | list):
        raise BadCompletion("the message content is neither text nor a list of parts")
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
        raise BadCompletion("tool_calls is not a list")
    normalized = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
            raise BadCompletion("a tool call has no function name")
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
