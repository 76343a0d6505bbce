"""A model's response body: read up to a cap, and parsed without holding the event loop.

A chat completion is a small JSON skeleton around a few strings, one of which
(the answer) may be megabytes. ``json.loads`` holds the GIL for the whole body
(4-9 ms per MB on the reference VM), and so does a thread running it: moving
the parse to a thread does not free the event loop (bench/README.md, "Big
answers", has the figures). So a body larger than ``INLINE_PARSE_BYTES`` is
parsed in steps, with a pass of the event loop between them: a scan that finds
the long string literals (``_SCAN_WINDOW`` bytes a step), the skeleton with
each long literal replaced by a placeholder, then each long literal decoded
``SLICE_BYTES`` at a time. Each step costs well under a millisecond.

A body cut at the cap almost always ends inside the long answer: that string is
closed where it was cut, and so is every container around it. A body cut
anywhere else raises ``ValueError``, as a body that is not JSON does.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["INLINE_PARSE_BYTES", "SLICE_BYTES", "parse_json", "read_capped"]

#: a body up to this size is parsed by one ``json.loads`` (about 1 ms on the reference VM)
INLINE_PARSE_BYTES = 256 * 2**10
#: a long string literal is decoded this many bytes at a time (about 0.5 ms)
SLICE_BYTES = 128 * 2**10
# Scanning steps (each a regex search in C) between passes of the event loop.
_STEPS_PER_PASS = 256

_OUTSIDE = re.compile(rb'["\[\]{}]')
# The inside of a string up to its closing quote: runs of plain bytes and escape pairs, matched
# in C without backtracking (possessive), at most _SCAN_WINDOW bytes per call.
_STRING_RUN = re.compile(rb'(?:[^"\\]++|\\.)*+', re.S)
_SCAN_WINDOW = 32 * 2**10
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")
_WHITESPACE = b" \t\r\n"
_BACKSLASH, _QUOTE = 0x5C, 0x22
_CLOSER = {ord("{"): b"}", ord("["): b"]"}
# The longest escape is a surrogate pair, \uD83D\uDE00: a cut looks this far back.
_ESCAPE_WINDOW = 12
# Enough for a cut to move back past a surrogate pair and a UTF-8 sequence and still make progress.
_MIN_SLICE = 64


async def read_capped(response: httpx.Response, cap: int) -> tuple[bytearray, bool]:
    """The (content-decoded) body of a streamed ``response``, at most ``cap`` bytes; True when there was more."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        room = cap - len(body)
        if len(chunk) > room:
            body += chunk[:room]
            return body, True
        body += chunk
    return body, False


@dataclass
class _Scan:
    #: [start, end) of each string literal longer than a slice, quotes included
    long: list[tuple[int, int]] = field(default_factory=list)
    #: where the string the body ends in starts (a body cut inside a string)
    open_string: int | None = None
    #: the containers still open where the body ends
    stack: bytearray = field(default_factory=bytearray)


async def _scan(body: bytes | bytearray, slice_bytes: int) -> _Scan:
    scan, pos, start, steps, size = _Scan(), 0, -1, 0, len(body)
    while True:
        steps += 1
        if steps % _STEPS_PER_PASS == 0:
            await asyncio.sleep(0)
        if start < 0:  # between strings: only quotes and brackets matter
            m = _OUTSIDE.search(body, pos)
            if m is None:
                return scan
            pos, char = m.end(), body[m.start()]
            if char == _QUOTE:
                start = m.start()
            elif char in _CLOSER:
                scan.stack.append(char)
            elif scan.stack:
                scan.stack.pop()
            continue
        window = min(pos + _SCAN_WINDOW, size)
        run = _STRING_RUN.match(body, pos, window)
        assert run is not None  # the pattern matches the empty string
        pos = run.end()
        if pos < size and body[pos] == _QUOTE:
            pos += 1
            if pos - start > slice_bytes:
                scan.long.append((start, pos))
            start = -1
        elif pos >= size - 1:  # the body ends inside the string (perhaps after a lone backslash)
            scan.open_string = start
            return scan
        else:  # the window ended (perhaps between a backslash and what it escapes): go on from there
            await asyncio.sleep(0)


def _safe_cut(body: bytes | bytearray, lo: int, target: int) -> int:
    """The last position in [lo, target] where the inside of a string starting at ``lo`` may be cut:
    not inside a UTF-8 sequence or an escape, nor between the halves of a surrogate pair."""
    cut = target
    lead = cut - 1
    while lead > lo and cut - lead < 4 and body[lead] & 0xC0 == 0x80:
        lead -= 1
    if lead >= lo and _utf8_length(body[lead]) > cut - lead:
        cut = lead
    first = body.find(b"\\", max(lo, cut - _ESCAPE_WINDOW), cut)
    if first >= 0:
        # Escapes that end before the window are whole; the first one in it may not be.
        cut = first if _escape_starts(body, lo, first) else first - 1
        if cut - 6 >= lo and _HIGH_SURROGATE.fullmatch(body, cut - 6, cut) and _escape_starts(body, lo, cut - 6):
            cut -= 6
    return max(cut, lo)


def _escape_starts(body: bytes | bytearray, lo: int, pos: int) -> bool:
    """Whether the backslash at ``pos`` starts an escape (rather than ending a ``\\\\``)."""
    run = pos
    while run > lo and body[run - 1] == _BACKSLASH:
        run -= 1
    return (pos - run) % 2 == 0


def _utf8_length(lead: int) -> int:
    if lead < 0xC0:
        return 1
    return 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


async def _decode_string(body: bytes | bytearray, start: int, stop: int, slice_bytes: int) -> str:
    """The text of the string literal whose inside is ``body[start:stop]``, a slice at a time.

    The text grows in place (CPython resizes a string nobody else holds) rather than being
    joined at the end: a join writes the whole text, into freshly mapped memory, in one go,
    which held the loop for 15-20 ms for a 4 MB answer with emoji (4 bytes a character).
    """
    text = ""
    while start < stop:
        end = stop if stop - start <= slice_bytes else _safe_cut(body, start, start + slice_bytes)
        text += json.loads(b'"' + body[start:end] + b'"')
        start = end
        await asyncio.sleep(0)
    return text


def _placeholder(index: int) -> bytes:
    # A NUL cannot appear raw in a JSON string, and no completion field holds one escaped.
    return b'"\\u0000hermes-long-string-%d"' % index


def _fill(value: Any, texts: dict[str, str]) -> Any:
    if isinstance(value, str):
        return texts.get(value, value)
    if isinstance(value, list):
        return [_fill(v, texts) for v in value]
    if isinstance(value, dict):
        return {_fill(k, texts): _fill(v, texts) for k, v in value.items()}
    return value


def _is_value(body: bytes | bytearray, quote: int, stack: bytearray) -> bool:
    """Whether the string opening at ``quote`` is a value (not an object's key)."""
    before = quote - 1
    while before >= 0 and body[before] in _WHITESPACE:
        before -= 1
    char = body[before] if before >= 0 else 0
    return char in b":[" or (char == ord(",") and stack[-1:] == b"[")


async def parse_json(body: bytes | bytearray, *, cut: bool = False, inline_bytes: int = INLINE_PARSE_BYTES,
                     slice_bytes: int = SLICE_BYTES) -> Any:
    """The JSON value of ``body``, closed where it was cut when ``cut``; ValueError when it is not JSON.

    Up to ``inline_bytes`` (and not cut) in one ``json.loads``; else in steps, strings longer
    than ``slice_bytes`` decoded a slice at a time.
    """
    if not cut and len(body) <= inline_bytes:
        return json.loads(body)
    slice_bytes = max(slice_bytes, _MIN_SLICE)
    scan = await _scan(body, slice_bytes)
    strings = [(start + 1, end - 1) for start, end in scan.long]  # the insides of the long literals
    ends_at, tail = len(body), b""
    if cut:
        closers = b"".join(_CLOSER[c] for c in reversed(scan.stack))
        if scan.open_string is not None and _is_value(body, scan.open_string, scan.stack):
            start = scan.open_string
            strings.append((start + 1, _safe_cut(body, start + 1, len(body))))
            scan.long.append((start, len(body)))
            tail = closers
        else:  # cut in a key or between values: drop the unfinished part, close the rest
            ends_at = scan.open_string if scan.open_string is not None else len(body)
            while ends_at > 0 and body[ends_at - 1] in _WHITESPACE:
                ends_at -= 1
            if ends_at > 0 and body[ends_at - 1] == ord(","):
                ends_at -= 1
            tail = closers
    skeleton, last = bytearray(), 0
    for index, (start, end) in enumerate(scan.long):
        skeleton += body[last:start]
        skeleton += _placeholder(index)
        last = end
    skeleton += body[last:ends_at]
    skeleton += tail
    value = json.loads(skeleton)
    texts = {f"\x00hermes-long-string-{i}": await _decode_string(body, start, stop, slice_bytes)
             for i, (start, stop) in enumerate(strings)}
    return _fill(value, texts) if texts else value
