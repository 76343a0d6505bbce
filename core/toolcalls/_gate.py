"""A streamed answer's text, held back where it may turn out to be a tool call or reasoning.

The person watching an answer being written must never see a text tool call as raw
JSON, nor a ``<think>`` block as the answer. ``StreamGate`` sits between the stream
and the listener: plain text passes at once (the common token costs a few ``in``
tests); from the first character that may begin a form it holds the text until it
can tell. A think block is dropped; a lone ``</think>`` (the block opened in the
prompt) takes back what was shown (``restart``) and goes on after it; a tool call
ends what is shown of this model call (the loop discards a preamble anyway); a
fenced block or a ``call:`` line that is no call goes out once it is complete.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._forms import parse_text_calls

__all__ = ["StreamGate"]

_THINK_MARKERS = ("<think>", "</think>")
_CALL_MARKERS = ("<tool_call>", "<|tool_call>", "<start_function_call>", "```")
_ALL_MARKERS = _THINK_MARKERS + _CALL_MARKERS
_BARE = "call:"
_BARE_START = re.compile(r"(?:(?<=\n)|^)[ \t]*call:")
_LINE_PREFIX = re.compile(r"(?:(?<=\n)|^)[ \t]*([a-z:]{0,4})\Z")


class StreamGate:
    """Feeds ``emit`` what may be shown of a streamed answer; ``calls``: tool-call forms are held too."""

    def __init__(self, emit: Callable[[str], None], restart: Callable[[], None], *, calls: bool) -> None:
        self._emit = emit
        self._restart = restart
        self._calls = calls
        self._markers = _ALL_MARKERS if calls else _THINK_MARKERS
        self._buf = ""
        self._held: str | None = None  # the form being held: a marker of _ALL_MARKERS or _BARE
        self._done = False  # a tool call began: nothing more of this call is shown
        self._line_start = True
        self._lstrip = False  # after reasoning taken out, the answer starts at its first non-space
        self._code = False  # inside a fenced block that is plainly code, not a call: shown as it comes
        self._open = True  # nothing held, nothing to strip, not done: a plain piece may pass at once

    def feed(self, delta: str) -> None:
        # Called for every token of every streamed answer: the plain one takes the shortest path.
        if self._open and "<" not in delta and "`" not in delta and not (
                self._calls and (self._line_start or "\n" in delta)):
            self._line_start = False
            self._emit(delta)
            return
        if self._done or not delta:
            return
        self._buf += delta
        self._drain(final=False)
        self._open = not (self._buf or self._done or self._lstrip)

    def close(self) -> None:
        """The stream ended: what is held and turned out plain goes out."""
        if not self._done:
            self._drain(final=True)
        self._buf = ""

    def _give(self, text: str) -> None:
        if self._lstrip:
            text = text.lstrip()
            self._lstrip = not text
        if text:
            self._line_start = text.endswith("\n")
            self._emit(text)

    def _drain(self, *, final: bool) -> None:
        while self._buf and not self._done:
            if self._code and not self._through_code(final):
                return
            if self._held is None:
                start, marker = self._next_marker()
                if marker is None:
                    keep = 0 if final else self._partial_suffix()
                    self._give(self._buf[:len(self._buf) - keep])
                    self._buf = self._buf[len(self._buf) - keep:]
                    return
                self._give(self._buf[:start])
                self._buf = self._buf[start:]
                if marker == "</think>":  # the block opened in the prompt: what was shown was reasoning
                    self._buf = self._buf[len(marker):]
                    self._restart()
                    self._line_start = self._lstrip = True
                    continue
                if marker in ("<tool_call>", "<|tool_call>", "<start_function_call>"):
                    self._done = True
                    return
                self._held = marker
            end = self._end_of_held(final)
            if end is None:
                if self._held == "```" and _plain_code(self._buf):  # code, not a call: no need to wait
                    self._give(self._buf)
                    self._buf, self._held, self._code = "", None, True
                return
            segment, self._buf = self._buf[:end], self._buf[end:]
            held, self._held = self._held, None
            if held == "<think>":
                self._lstrip = True
                continue
            if parse_text_calls(segment).calls:
                self._done = True
                return
            self._give(segment)

    def _through_code(self, final: bool) -> bool:
        """Show a plain code block up to its closing fence; True once it is closed."""
        at = self._buf.find("```")
        if at < 0:
            keep = 0 if final else next((n for n in (2, 1) if self._buf.endswith("`" * n)), 0)
            self._give(self._buf[:len(self._buf) - keep])
            self._buf = self._buf[len(self._buf) - keep:]
            return False
        self._give(self._buf[:at + 3])
        self._buf, self._code = self._buf[at + 3:], False
        return True

    def _next_marker(self) -> tuple[int, str | None]:
        buf, best, found = self._buf, len(self._buf), None
        for marker in self._markers:
            at = buf.find(marker)
            if 0 <= at < best:
                best, found = at, marker
        if self._calls:
            bare = _BARE_START.search(buf)
            if bare is not None and bare.start() < best and (bare.start() > 0 or self._line_start):
                best, found = bare.start(), _BARE
        return best, found

    def _end_of_held(self, final: bool) -> int | None:
        buf, held = self._buf, self._held
        if held == "<think>":
            at = buf.find("</think>")
            end = None if at < 0 else at + len("</think>")
        elif held == "```":
            at = buf.find("```", 3)
            end = None if at < 0 else at + 3
        else:  # a call: line ends at the first newline where its brackets are closed
            end = _balanced_line_end(buf)
        if end is None and final:
            return len(buf)
        return end

    def _partial_suffix(self) -> int:
        """How many characters at the end of the buffer may be the start of a marker."""
        buf, keep = self._buf, 0
        for marker in self._markers:
            for size in range(min(len(marker) - 1, len(buf)), keep, -1):
                if buf.endswith(marker[:size]):
                    keep = size
                    break
        if self._calls:
            line = _LINE_PREFIX.search(buf)
            if line is not None and _BARE.startswith(line.group(1)) and (line.start() > 0 or self._line_start):
                keep = max(keep, len(buf) - line.start())
        return keep


def _balanced_line_end(text: str) -> int | None:
    """Just past the first newline of ``text`` at which every bracket opened before it is closed."""
    depth = 0
    for at, char in enumerate(text):
        if char in "{[(":
            depth += 1
        elif char in "}])":
            depth -= 1
        elif char == "\n" and depth <= 0:
            return at + 1
    return None


def _plain_code(held: str) -> bool:
    """Whether a fenced block (``held`` starts with its fence) plainly holds code: its first line is
    complete and what follows does not start a JSON object."""
    newline = held.find("\n")
    if newline < 0:
        return False
    body = held[newline + 1:].lstrip()
    return bool(body) and not body.startswith("{")
