"""A command's output, kept within a fixed size: its head and its tail, and a count of the rest.

Memory stays at ``limit`` bytes however much a command prints: the first half of the limit is
kept as it comes, after that only the last half is kept (older bytes are dropped as new ones
arrive) and the bytes in between are only counted. ``text()`` makes it readable for the model.
"""

from __future__ import annotations

import re

#: terminal colour and cursor sequences (CSI): noise for the model
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
#: control characters other than \n and \t (C0, DEL, C1), shown as U+FFFD
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class OutputCapture:
    """Bytes fed in order; at most ``limit`` of them kept."""

    def __init__(self, limit: int) -> None:
        self._head_limit = limit // 2
        self._tail_limit = limit - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        #: every byte fed so far
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self._tail_limit:
            self._tail[:] = data[-self._tail_limit:]
        else:
            self._tail += data
            excess = len(self._tail) - self._tail_limit
            if excess > 0:
                del self._tail[:excess]

    @property
    def omitted(self) -> int:
        return self.total - len(self._head) - len(self._tail)

    def looks_binary(self) -> bool:
        """NUL bytes, or many bytes that are neither text nor valid UTF-8."""
        sample = bytes(self._head[:8192]) + bytes(self._tail[-8192:])
        if b"\x00" in sample:
            return True
        text = sample.decode("utf-8", errors="replace")
        odd = text.count("\ufffd") + len(_CONTROL.findall(text.replace("\r", "").replace("\x1b", "")))
        return odd > max(8, len(text) // 10)

    def text(self) -> str:
        """Head, an "… N bytes omitted …" line when bytes were dropped, tail; cleaned for reading."""
        if self.omitted == 0:
            return _clean(bytes(self._head + self._tail))
        head = _clean(_cut_end(bytes(self._head)))
        tail = _clean(_cut_start(bytes(self._tail)))
        gap = f"… {self.omitted:,} bytes omitted …"
        return f"{head}{'' if head.endswith(chr(10)) else chr(10)}{gap}\n{tail}"


def _clean(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    text = _ANSI.sub("", text)
    # "\r\n" is a line end; a lone "\r" (progress bars redrawing a line) starts a new line
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("\ufffd", text)


def _cut_end(data: bytes) -> bytes:
    """Without a UTF-8 sequence cut off at the end (it would show as a replacement character)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:  # the lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data if back >= need else data[:-back]
    return data


def _cut_start(data: bytes) -> bytes:
    """Without the continuation bytes of a UTF-8 sequence whose start was dropped."""
    skip = 0
    while skip < min(3, len(data)) and 0x80 <= data[skip] < 0xC0:
        skip += 1
    return data[skip:]
