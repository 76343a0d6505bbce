"""Tool calls written as text, in the forms local models use, taken out of an answer.

- ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (Hermes, Qwen and the many
  models tuned on their template; the closing tag may be missing at the very end);
- ``<|tool_call>call:name{key:<|"|>value<|"|>}<tool_call|>`` (Gemma 4),
  ``<start_function_call>call:name{key:<escape>value<escape>}<end_function_call>``
  (FunctionGemma) and a bare ``call:name{...}`` or ``call:name(key: value)`` at the start
  of a line (other Gemma builds);
- a fenced block (```` ```json ````, ```` ```tool_call ```` or bare) holding one JSON object
  with ``name`` and ``arguments`` (or ``parameters``).

A call that cannot be read is still a call (``TextCall.problem`` says why), so the model
hears what was wrong instead of the person seeing raw JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ._relaxed import _RelaxedError, read_relaxed_object

__all__ = ["ParsedAnswer", "TextCall", "parse_text_calls"]


@dataclass(frozen=True)
class TextCall:
    #: the tool's name ("" when the call named none that could be read)
    name: str
    #: the arguments as JSON text, or the raw text when they are not an object
    arguments: str
    #: why the call cannot be run as written (None: it can)
    problem: str | None = None


@dataclass(frozen=True)
class ParsedAnswer:
    #: the answer's text with the calls taken out
    content: str
    calls: list[TextCall]


_TAG = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_GEMMA = re.compile(r"<\|tool_call>\s*call:([\w.-]+)\s*(.*?)(?:<tool_call\|>|\Z)", re.S)
_FUNCTION_GEMMA = re.compile(r"<start_function_call>\s*call:([\w.-]+)\s*(.*?)(?:<end_function_call>|\Z)", re.S)
_BARE = re.compile(r"(?:^|(?<=\n))[ \t]*call:([\w.-]+)[ \t]*(?=[{(])")
_FENCE = re.compile(r"```[ \t]*(json|tool_call|tool_code|tool)?[ \t]*\n(.*?)\n?[ \t]*```", re.S)
_NAME_IN_BROKEN = re.compile(r'"name"\s*:\s*"([\w.-]+)"')
_NAME_OK = re.compile(r"[\w.-]{1,64}")
# Quick test: none of these in the text, no text call in it.
MARKERS = ("<tool_call>", "<|tool_call>", "<start_function_call>", "call:", "```")


def parse_text_calls(text: str) -> ParsedAnswer:
    """The calls in ``text`` in the order written, and the text without them."""
    if not any(marker in text for marker in MARKERS):
        return ParsedAnswer(text, [])
    found: list[tuple[int, int, list[TextCall]]] = []
    for match in _TAG.finditer(text):
        found.append((match.start(), match.end(), _json_calls(match.group(1))))
    for pattern in (_GEMMA, _FUNCTION_GEMMA):
        for match in pattern.finditer(text):
            found.append((match.start(), match.end(), [_relaxed_call(match.group(1), match.group(2))]))
    for match in _BARE.finditer(text):
        call, end = _bare_call(text, match)
        found.append((match.start(), end, [call]))
    for match in _FENCE.finditer(text):
        fenced = _fenced_call(match.group(1), match.group(2))
        if fenced is not None:
            found.append((match.start(), match.end(), [fenced]))
    if not found:
        return ParsedAnswer(text, [])
    found.sort(key=lambda f: f[0])
    calls: list[TextCall] = []
    kept: list[str] = []
    at = 0
    for start, end, these in found:
        if start < at:  # inside a form already taken (a call: in a tag, a tag in a fence)
            continue
        kept.append(text[at:start])
        calls.extend(these)
        at = end
    kept.append(text[at:])
    content = re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()
    return ParsedAnswer(content, calls)


def _checked(name: Any, arguments: Any, raw: str) -> TextCall:
    if not isinstance(name, str) or not _NAME_OK.fullmatch(name):
        return TextCall("", json.dumps({"text": raw[:500]}, ensure_ascii=False),
                        "the tool call names no tool (write \"name\": \"<tool name>\")")
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):  # arguments sent as JSON text, as the OpenAI format has them
        return TextCall(name, arguments)
    if not isinstance(arguments, dict):
        return TextCall(name, json.dumps(arguments, ensure_ascii=False), "the arguments are not an object")
    return TextCall(name, json.dumps(arguments, ensure_ascii=False))


def _json_calls(inner: str) -> list[TextCall]:
    """The calls of one ``<tool_call>`` tag: usually one JSON object, sometimes several."""
    calls: list[TextCall] = []
    decoder, pos, raw = json.JSONDecoder(), 0, inner.strip()
    while pos < len(raw):
        try:
            value, pos = decoder.raw_decode(raw, pos)
        except ValueError:
            value = _relaxed_or_none(raw[pos:])
            if value is None:
                calls.append(_broken(raw[pos:]))
                break
            pos = len(raw)
        if not isinstance(value, dict):
            calls.append(TextCall("", json.dumps({"text": raw[:500]}, ensure_ascii=False),
                                  "the tool call is not a JSON object"))
            break
        calls.append(_checked(value.get("name"), value.get("arguments", value.get("parameters")), raw))
        while pos < len(raw) and raw[pos] in " \t\r\n,":
            pos += 1
    return calls or [_broken(inner)]


def _relaxed_or_none(text: str) -> dict[str, Any] | None:
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        value, _ = read_relaxed_object(text)
    except _RelaxedError:
        return None
    return value


def _broken(raw: str) -> TextCall:
    """A call whose JSON cannot be read: its name if one can be made out, its text as the arguments."""
    named = _NAME_IN_BROKEN.search(raw)
    problem = "the tool call is not valid JSON"
    if named is None:
        return TextCall("", json.dumps({"text": raw[:500]}, ensure_ascii=False), problem)
    return TextCall(named.group(1), raw.strip()[:2000], problem)


def _relaxed_call(name: str, args: str) -> TextCall:
    args = args.strip()
    if not args:
        return TextCall(name, "{}")
    try:
        value, _ = read_relaxed_object(args)
    except _RelaxedError as exc:
        return TextCall(name, args[:2000], f"the arguments cannot be read: {exc}")
    return TextCall(name, json.dumps(value, ensure_ascii=False))


def _bare_call(text: str, match: re.Match[str]) -> tuple[TextCall, int]:
    name = match.group(1)
    try:
        value, end = read_relaxed_object(text, match.end())
    except _RelaxedError as exc:
        line_end = text.find("\n", match.end())
        end = len(text) if line_end < 0 else line_end
        return TextCall(name, text[match.end():end][:2000], f"the arguments cannot be read: {exc}"), end
    return TextCall(name, json.dumps(value, ensure_ascii=False)), end


def _fenced_call(language: str | None, body: str) -> TextCall | None:
    """The call in a fenced block, or None when the block is an ordinary one (code, an example)."""
    stripped = body.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        # Broken JSON is a call only when it plainly meant to be one.
        meant = language in ("tool_call", "tool_code", "tool") or (
            '"name"' in stripped and ('"arguments"' in stripped or '"parameters"' in stripped))
        return _broken(stripped) if meant else None
    if not isinstance(value, dict) or "name" not in value:
        return None
    if "arguments" not in value and "parameters" not in value and language not in ("tool_call", "tool"):
        return None
    extra = set(value) - {"name", "arguments", "parameters", "type", "id"}
    if extra and language not in ("tool_call", "tool"):
        return None  # an object that has more in it is data, not a call
    return _checked(value.get("name"), value.get("arguments", value.get("parameters")), stripped)
