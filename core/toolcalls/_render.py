"""A request for a model that takes tools as text: the schemas described in the system prompt,
earlier calls written back as ``<tool_call>`` tags, results as plain user messages.

Stored history keeps every call in the OpenAI shape (``tool_calls`` on the assistant
message, a ``tool`` message per result), whichever way the model wrote it; this module
renders it for a text model at request time, so a session moves between models freely.
Results go back as ``user`` messages (``[Tool result: name]``), consecutive ones joined:
servers without tool support do not all take the ``tool`` role, and some chat templates
(Gemma's) refuse two messages of the same role in a row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["describe_tools", "render_messages", "result_prefix"]

_INSTRUCTIONS = """# Tools

You can use the tools listed below. To call one, write a tool call in exactly this form, on a line of its own:
<tool_call>{"name": "TOOL_NAME", "arguments": {ARGUMENTS AS A JSON OBJECT}}</tool_call>

Rules:
- Use only the tools listed here, with arguments that match their JSON schema.
- You may call several tools in one answer, one <tool_call> tag each; then stop and wait.
- Each result comes back in a message that starts with "[Tool result: TOOL_NAME]".
- When no tool is needed, answer normally, without any <tool_call> tag.

Available tools (one JSON object per line):
<tools>
{tools}
</tools>"""


def result_prefix(name: str) -> str:
    return f"[Tool result: {name}]"


def describe_tools(tools: Sequence[Mapping[str, Any]]) -> str:
    """The system prompt's part that tells a text model its tools."""
    lines = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool.get("function"), Mapping) else tool
        if not isinstance(function, Mapping):
            continue
        entry = {"name": function.get("name"), "description": function.get("description", ""),
                 "parameters": function.get("parameters", {})}
        lines.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
    return _INSTRUCTIONS.replace("{tools}", "\n".join(lines))


def render_messages(messages: Sequence[Mapping[str, Any]],
                    tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """``messages`` as a text model reads them (a new list; the given messages are not changed)."""
    out: list[dict[str, Any]] = []
    results: list[str] = []
    described = not tools

    def flush() -> None:
        if results:
            out.append({"role": "user", "content": "\n\n".join(results)})
            results.clear()

    for message in messages:
        role = message.get("role")
        if role == "tool":
            name = str(message.get("name") or "tool")
            results.append(f"{result_prefix(name)}\n{_text(message.get('content'))}")
            continue
        flush()
        rendered = dict(message)
        if role == "system" and not described and tools:
            rendered["content"] = _append(message.get("content"), describe_tools(tools))
            described = True
        elif role == "assistant" and message.get("tool_calls"):
            calls = rendered.pop("tool_calls")
            tags = "\n".join(_tag(call) for call in calls if isinstance(call, Mapping))
            text = _text(message.get("content")).strip()
            rendered["content"] = f"{text}\n{tags}" if text else tags
        out.append(rendered)
    flush()
    if not described and tools:
        out.insert(0, {"role": "system", "content": describe_tools(tools)})
    return _join_users(out)


def _tag(call: Mapping[str, Any]) -> str:
    function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
    assert isinstance(function, Mapping)
    arguments: Any = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass  # a broken call is shown as it was written
    payload = {"name": function.get("name"), "arguments": arguments if arguments is not None else {}}
    return f"<tool_call>{json.dumps(payload, ensure_ascii=False)}</tool_call>"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    return ""


def _append(content: Any, extra: str) -> Any:
    if isinstance(content, list):
        return [*content, {"type": "text", "text": extra}]
    text = content if isinstance(content, str) else ""
    return f"{text}\n\n{extra}" if text else extra


def _join_users(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent user messages of plain text joined into one (results followed by the next question)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        last = out[-1] if out else None
        if (last is not None and last.get("role") == "user" and message.get("role") == "user"
                and isinstance(last.get("content"), str) and isinstance(message.get("content"), str)):
            out[-1] = {**last, "content": f"{last['content']}\n\n{message['content']}"}
        else:
            out.append(message)
    return out
