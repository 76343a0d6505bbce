"""Which way a model takes tools (``model.tool_format``), and a request and answer made to fit it.

``native``: tools go in the request's ``tools`` field and come back as ``tool_calls``.
``text``: the schemas are described in the system prompt and calls are read from the
answer's text (``_forms``). ``auto`` (the default) starts native and switches a model to
text, for the daemon's life, when its server refuses ``tools`` or the model writes a text
call to an offered tool instead of a native one.

Whatever the way, the answer leaves here in the OpenAI shape (``tool_calls``, a
``reasoning_content`` instead of ``<think>`` blocks): the agent loop never knows.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import structlog

from ._forms import MARKERS, TextCall, parse_text_calls
from ._render import render_messages
from ._think import split_think

__all__ = ["INVALID_CALL_NAME", "TOOL_FORMATS", "ToolFormat", "ToolFormats", "offered_names", "rejects_tools",
           "settle_message", "text_request", "tool_format_for"]

log = structlog.get_logger("hermes.core")

ToolFormat = Literal["auto", "native", "text"]
TOOL_FORMATS: tuple[ToolFormat, ...] = ("auto", "native", "text")
#: the name a text call that named no readable tool is stored under (the registry answers it with
#: "there is no tool named ...", listing the real ones)
INVALID_CALL_NAME = "invalid_tool_call"

# What Ollama ("<model> does not support tools", HTTP 400), llama.cpp without --jinja ("tools param
# requires --jinja flag", HTTP 500; "Unsupported param: tools" / "tool_choice"), OpenRouter ("No
# endpoints found that support tool use") and OpenAI-compatible proxies say when a model or server
# cannot take the ``tools`` field.
_REFUSAL = re.compile(
    r"does not support tools|tools? (?:are |is )?not supported|unsupported param(?:eter)?:?\s*'?\"?tool"
    r"|tools param requires|support tool use|tool_choice[^.]*(?:not supported|unsupported)",
    re.I,
)


def tool_format_for(model: str, default: ToolFormat, overrides: Mapping[str, str] | None = None) -> ToolFormat:
    """The configured tool format of ``model``: its own entry in ``overrides`` (from
    ``models.allowed[*].tool_format``), else ``default`` (``model.tool_format``)."""
    chosen = (overrides or {}).get(model)
    return chosen if chosen in TOOL_FORMATS else default


class ToolFormats:
    """The tool format of each model for one daemon run: configured, or learned by ``auto``."""

    def __init__(self, default: ToolFormat = "auto", overrides: Mapping[str, str] | None = None) -> None:
        self.default = default
        self.overrides = dict(overrides or {})
        self._learned: dict[str, ToolFormat] = {}

    def of(self, model: str) -> ToolFormat:
        return self._learned.get(model) or tool_format_for(model, self.default, self.overrides)

    def learn_text(self, model: str, why: str) -> None:
        """``auto`` found that ``model`` takes tools as text: so it does from now on."""
        if self.of(model) == "auto":
            self._learned[model] = "text"
            log.info("model.tool_format_learned", model=model, tool_format="text", why=why)


def rejects_tools(payload: Any) -> bool:
    """Whether an error body says the server or model cannot take the ``tools`` field (not any
    400: a malformed request or a long context must surface as what it is)."""
    error = payload.get("error") if isinstance(payload, dict) else None
    texts = [error, payload.get("message") if isinstance(payload, dict) else None]
    if isinstance(error, dict):
        texts += [error.get("message"), error.get("code"), error.get("param")]
    return any(isinstance(t, str) and _REFUSAL.search(t) for t in texts)


def offered_names(tools: Sequence[Mapping[str, Any]] | None) -> frozenset[str]:
    names = set()
    for tool in tools or ():
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return frozenset(names)


def text_request(body: dict[str, Any]) -> None:
    """``body`` (a chat completion request) made for a text model, in place."""
    tools = body.pop("tools", None)
    body.pop("tool_choice", None)
    body.pop("parallel_tool_calls", None)
    body["messages"] = render_messages(body.get("messages") or [], tools)


def settle_message(message: dict[str, Any], fmt: ToolFormat,
                   offered: frozenset[str]) -> tuple[dict[str, Any] | None, bool]:
    """The answer's message in the OpenAI shape: think blocks moved to ``reasoning_content``, text
    calls (``text``; ``auto`` when one names an offered tool) made ``tool_calls``. Returns
    ``(new message or None when nothing changed, whether text calls were found)``."""
    content = message.get("content")
    if not isinstance(content, str) or not content:
        return None, False
    changed: dict[str, Any] | None = None
    reasoning, answer = split_think(content)
    if reasoning is not None:
        changed = {**message, "content": answer}
        known = message.get("reasoning_content")
        changed["reasoning_content"] = f"{known}\n\n{reasoning}" if isinstance(known, str) and known else reasoning
        content = answer
    if fmt == "native" or not offered or message.get("tool_calls") or not any(m in content for m in MARKERS):
        return changed, False
    parsed = parse_text_calls(content)
    if not parsed.calls:
        return changed, False
    if fmt == "auto" and not any(call.name in offered for call in parsed.calls):
        return changed, False  # a JSON example in an answer, not a call
    out = dict(changed or message)
    out["content"] = parsed.content or None
    out["tool_calls"] = [_native(call) for call in parsed.calls]
    return out, True


def _native(call: TextCall) -> dict[str, Any]:
    name = call.name or INVALID_CALL_NAME
    arguments = call.arguments
    if call.problem and not call.name:
        arguments = json.dumps({"problem": call.problem, **_loads(arguments)}, ensure_ascii=False)
    if call.problem:
        log.info("model.text_call_malformed", tool=name, problem=call.problem)
    return {"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
            "function": {"name": name, "arguments": arguments}}


def _loads(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"text": text}
    return value if isinstance(value, dict) else {"text": text}
