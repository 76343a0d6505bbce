"""The arguments of a Gemma-style call, ``{key:<|"|>text<|"|>,n:42}``, read into a JSON object.

Gemma writes keys bare and delimits strings by a token of its own (``<|"|>`` in
Gemma 4, ``<escape>`` in FunctionGemma); many builds write plain JSON or
JavaScript-like objects (``{command: "ls -la"}``) instead. This reader takes all
of them: bare or quoted keys; strings in either token, or in double or single
quotes; numbers, ``true``/``false``/``null``, nested objects and lists.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["_RelaxedError", "read_relaxed_object"]

_STRING_TOKENS = ('<|"|>', "<escape>")
_BARE_KEY = re.compile(r"[A-Za-z_$][\w$.-]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORDS = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}
_BARE_WORD = re.compile(r"[A-Za-z_][\w.-]*")
# Deeper nesting than any tool's arguments need is refused rather than recursed into.
_MAX_DEPTH = 32


class _RelaxedError(ValueError):
    """The text is not an object this reader understands; the message says where."""


def read_relaxed_object(text: str, start: int = 0) -> tuple[dict[str, Any], int]:
    """The object at ``text[start]`` (a ``{``, or a ``(`` for ``call:name(key: value)``) and where it ends."""
    reader = _Reader(text)
    reader.pos = start
    reader.skip()
    if text.startswith("(", reader.pos):
        return reader.object(0, close=")"), reader.pos
    value = reader.value(0)
    if not isinstance(value, dict):
        raise _RelaxedError("the arguments are not an object")
    return value, reader.pos


class _Reader:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\r\n":
            self.pos += 1

    def fail(self, what: str) -> _RelaxedError:
        near = self.text[self.pos:self.pos + 20]
        return _RelaxedError(f"{what} at character {self.pos} (near {near!r})")

    def value(self, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise self.fail("nested too deeply")
        self.skip()
        text, pos = self.text, self.pos
        if pos >= len(text):
            raise self.fail("the arguments end too early")
        char = text[pos]
        if char == "{":
            return self.object(depth)
        if char == "[":
            return self.array(depth)
        string = self.string()
        if string is not None:
            return string
        number = _NUMBER.match(text, pos)
        if number is not None:
            self.pos = number.end()
            literal = number.group()
            return float(literal) if any(c in literal for c in ".eE") else int(literal)
        word = _BARE_WORD.match(text, pos)
        if word is not None and word.group() in _WORDS:
            self.pos = word.end()
            return _WORDS[word.group()]
        raise self.fail("expected a value")

    def string(self) -> str | None:
        text, pos = self.text, self.pos
        for token in _STRING_TOKENS:
            if text.startswith(token, pos):
                end = text.find(token, pos + len(token))
                if end < 0:
                    raise self.fail("a string is not closed")
                self.pos = end + len(token)
                return text[pos + len(token):end]
        if text[pos] == '"':
            try:
                value, end = json.JSONDecoder().raw_decode(text, pos)
            except ValueError as exc:
                raise self.fail("a string is not valid") from exc
            self.pos = end
            return str(value)
        if text[pos] == "'":
            end = pos + 1
            out: list[str] = []
            while end < len(text) and text[end] != "'":
                if text[end] == "\\" and end + 1 < len(text):
                    end += 1
                out.append(text[end])
                end += 1
            if end >= len(text):
                raise self.fail("a string is not closed")
            self.pos = end + 1
            return "".join(out)
        return None

    def key(self) -> str:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("the arguments end too early")
        string = self.string()
        if string is not None:
            return string
        bare = _BARE_KEY.match(self.text, self.pos)
        if bare is None:
            raise self.fail("expected a key")
        self.pos = bare.end()
        return bare.group()

    def expect(self, char: str) -> None:
        self.skip()
        if self.pos >= len(self.text) or self.text[self.pos] != char:
            raise self.fail(f"expected {char!r}")
        self.pos += 1

    def object(self, depth: int, close: str = "}") -> dict[str, Any]:
        self.pos += 1  # the { (or the ( of a call's arguments)
        out: dict[str, Any] = {}
        self.skip()
        if self.text.startswith(close, self.pos):
            self.pos += 1
            return out
        while True:
            key = self.key()
            self.skip()
            if self.text.startswith("=", self.pos):  # call:name(key=value)
                self.pos += 1
            else:
                self.expect(":")
            out[key] = self.value(depth + 1)
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
                if self.text.startswith(close, self.pos):  # a trailing comma
                    self.pos += 1
                    return out
                continue
            self.expect(close)
            return out

    def array(self, depth: int) -> list[Any]:
        self.pos += 1  # the [
        out: list[Any] = []
        self.skip()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth + 1))
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
                if self.text.startswith("]", self.pos):
                    self.pos += 1
                    return out
                continue
            self.expect("]")
            return out
