"""Split long text to a platform's limit without losing a character.

Prefers paragraph, then line, then word boundaries; never leaves a code fence
open in one chunk without reopening it in the next. The concatenation of the
chunks, with the fence markers added at split points removed, is the input.
"""

from __future__ import annotations

from collections.abc import Callable

FENCE = "```"


def _cut_point(text: str, limit: int, measure: Callable[[str], int]) -> int:
    """The largest prefix length of ``text`` that measures <= limit, at a nice boundary."""
    lo, hi = 0, len(text)
    # Largest n with measure(text[:n]) <= limit (measure is monotonic).
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measure(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    n = lo
    if n >= len(text):
        return n
    window = text[:n]
    for sep in ("\n\n", "\n", " "):
        at = window.rfind(sep)
        if at > n // 2:
            return at + len(sep)
    # No boundary: hard cut, but never between a surrogate pair's halves.
    if n > 0 and 0xD800 <= ord(text[n - 1]) <= 0xDBFF:
        n -= 1
    return max(n, 1)


def split_text(text: str, limit: int, measure: Callable[[str], int] = len) -> list[str]:
    if measure(text) <= limit:
        return [text]
    chunks: list[str] = []
    rest = text
    reopen = ""  # fence line to reopen at the start of the next chunk
    while rest:
        budget = limit - measure(reopen)
        closing = "\n" + FENCE
        piece_len = _cut_point(rest, budget, measure)
        piece = rest[:piece_len]
        open_fence = _open_fence(reopen + piece)
        if open_fence is not None and piece_len < len(rest):
            # Leave room to close the fence inside this chunk.
            piece_len = _cut_point(rest, budget - measure(closing), measure)
            piece = rest[:piece_len]
            open_fence = _open_fence(reopen + piece)
        chunk = reopen + piece
        rest = rest[piece_len:]
        if open_fence is not None and rest:
            chunk += closing
            reopen = open_fence + "\n"
        else:
            reopen = ""
        chunks.append(chunk)
    return chunks


def _open_fence(text: str) -> str | None:
    """The opening fence line (e.g. ```python) if ``text`` ends inside a code block."""
    inside: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(FENCE):
            inside = None if inside is not None else stripped
    return inside


def join_chunks(chunks: list[str]) -> str:
    """Inverse of split_text: drop the fence markers added at split points."""
    out = ""
    for i, chunk in enumerate(chunks):
        if i > 0 and _open_fence(out) is not None and out.endswith("\n" + FENCE):
            out = out[: -len("\n" + FENCE)]
            first_nl = chunk.find("\n")
            chunk = chunk[first_nl + 1 :]
        out += chunk
    return out
