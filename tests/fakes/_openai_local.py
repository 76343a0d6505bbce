"""What local model servers do that hosted ones do not: refuse ``tools``, write tool calls as text.

``refusal(server, model)`` is the error a server without function calling answers a
request carrying ``tools`` with, as the real ones word it: Ollama (HTTP 400,
``"<model> does not support tools"``, in the OpenAI error shape its ``/v1`` endpoint
uses) and llama.cpp's ``llama-server`` started without ``--jinja`` (HTTP 500,
``"tools param requires --jinja flag"``, type ``server_error``).

``text_call(form, name, arguments)`` writes one tool call the way a model without
native function calling does, in each form ``core.toolcalls`` reads: ``"tag"``
(Hermes/Qwen ``<tool_call>`` JSON), ``"gemma"`` (Gemma 4's ``<|tool_call>call:...``),
``"function_gemma"``, ``"call"`` (a bare ``call:name{...}`` line) and ``"fenced"`` (a
```` ```json ```` block).
"""

from __future__ import annotations

import json
from typing import Any, Literal

LocalServer = Literal["ollama", "llamacpp"]
TextForm = Literal["tag", "gemma", "function_gemma", "call", "fenced"]
TEXT_FORMS: tuple[TextForm, ...] = ("tag", "gemma", "function_gemma", "call", "fenced")


def refusal(server: LocalServer, model: str) -> tuple[int, dict[str, Any]]:
    """``(status, body)`` of the server's answer to ``tools`` it cannot take."""
    if server == "ollama":
        message = f"registry.ollama.ai/library/{model} does not support tools"
        return 400, {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
    return 500, {"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}}


def text_call(form: TextForm, name: str, arguments: dict[str, Any]) -> str:
    if form == "tag":
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
    if form == "gemma":
        return "<|tool_call>call:" + name + _gemma_args(arguments, '<|"|>') + "<tool_call|>"
    if form == "function_gemma":
        return f"<start_function_call>call:{name}{_gemma_args(arguments, '<escape>')}<end_function_call>"
    if form == "call":
        return f"call:{name}{json.dumps(arguments)}"
    return f"```json\n{json.dumps({'name': name, 'arguments': arguments}, indent=2)}\n```"


def _gemma_args(arguments: dict[str, Any], quote: str) -> str:
    """Gemma's own syntax: bare keys, strings between ``quote`` tokens."""
    parts = []
    for key, value in arguments.items():
        shown = f"{quote}{value}{quote}" if isinstance(value, str) else json.dumps(value)
        parts.append(f"{key}:{shown}")
    return "{" + ",".join(parts) + "}"
