"""Split long text to a platform's limit without losing a character.

Prefers paragraph, then line, then word boundaries (not inside `inline code`),
then any point that does not break up a character cluster (emoji sequences,
combining marks). A code block cut in two is closed at the end of one chunk and
reopened, with the same info string (```python), at the start of the next, so
every chunk renders on its own. ``join_chunks`` removes exactly those added
markers: ``join_chunks(split_text(t, n)) == t``.

Fences are read line by line, the way chat platforms show them: a line whose
first non-blank characters are ``` opens a block, the next such line closes it.
A chunk is read the same way, so its partial first and last lines count as lines;
cut points are chosen so that this never changes what is code and what is not
(no cut inside a fence line, none just before a ``` that would then start a
line). Only when no such point fits the limit (a fence line or a run of blanks
before ``` longer than a chunk) is a cut made anyway; chunks stay balanced and
lossless, but the rendering of that stretch may differ. A block the text itself
leaves open stays open in the last chunk: splitting does not edit the reply.
Below a limit of 16 the markers cannot be afforded and code blocks are split
like prose.

``measure`` counts a string in the platform's units (``len``, or ``utf16_len``
for Telegram). It must be additive, ``measure(a + b) == measure(a) + measure(b)``,
as both are; splitting never cuts inside a code point, so no unit count ever
sees half a character.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["FENCE", "join_chunks", "split_text", "utf16_len"]

FENCE = "```"
Measure = Callable[[str], int]

_ZWJ = "\u200d"


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units (Telegram's unit): astral characters count 2."""
    # surrogatepass: a lone surrogate (malformed input) counts one unit instead of raising.
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def split_text(text: str, limit: int, measure: Measure = len) -> list[str]:
    """Chunks of ``text``, each measuring at most ``limit``; ``[]`` for empty text.

    Raises ``ValueError`` only if a single character measures more than ``limit``.
    """
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    if not text:
        return []
    if measure(text) <= limit:
        return [text]
    chunks: list[str] = []
    state = _State(inside=False, opener="")
    start = 0
    while start < len(text):
        head = _head(state, limit, measure)
        cut = _Planner(text, start, state, head, limit, measure).cut()
        chunk = head + text[start : cut.at]
        if cut.at < len(text) and cut.state.inside:
            markers = _markers(cut.state.opener, limit, measure)
            assert markers is not None  # _Planner._fits refuses such cuts otherwise
            chunk += markers[1]
        if measure(chunk) > limit:  # only reachable with a non-additive measure
            raise ValueError(f"measure is not additive: a planned chunk measures {measure(chunk)} > {limit}")
        chunks.append(chunk)
        start, state = cut.at, cut.state
    return chunks


def join_chunks(chunks: Sequence[str]) -> str:
    """Inverse of ``split_text``: drop the fence markers added at split points.

    A closing marker was added to a chunk exactly when it ends with a newline and
    a backtick run as long as the one starting the next chunk; then the next
    chunk's first line is the reopening marker. ``split_text`` never cuts where
    original text would look like that.
    """
    out: list[str] = []
    reopened = False
    for i, chunk in enumerate(chunks):
        if reopened:
            chunk = chunk[chunk.index("\n") + 1 :]
        reopened = False
        if i + 1 < len(chunks):
            run = _backtick_run(chunks[i + 1], 0)
            if len(run) >= len(FENCE) and chunk.endswith("\n" + run):
                chunk = chunk[: -len(run) - 1]
                reopened = True
        out.append(chunk)
    return "".join(out)


# -- fence state -------------------------------------------------------------------


@dataclass(frozen=True)
class _State:
    inside: bool  # inside a code block
    opener: str  # the line that opened it (stripped), "" outside


@dataclass(frozen=True)
class _Line:
    """One line of a chunk: from ``start`` (a line start, or the chunk start) to ``end``."""

    start: int
    end: int  # index of the "\n" ending it, or len(text)
    content: int  # index of its first non-blank character (== end when blank)
    fence: bool  # read as a line on its own, it opens or closes a block
    before: _State


@dataclass(frozen=True)
class _Cut:
    at: int
    state: _State  # fence state of the chunk at the cut
    faithful: bool  # chunks read the same as the original across this cut


def _markers(opener: str, limit: int, measure: Measure) -> tuple[str, str] | None:
    """(reopening line + "\\n", "\\n" + closing run) for a block opened by ``opener``.

    None when the limit is too small to afford them: then no chunk may end
    inside a code block (splitting degrades to plain text rather than failing).
    """
    run = _backtick_run(opener, 0)
    # The info string is worth repeating, but not at the cost of most of a
    # chunk: markers may take at most half the limit.
    for head in (opener, run, FENCE):
        tail = "\n" + _backtick_run(head, 0)
        if measure(head) + measure("\n") + measure(tail) <= limit // 2:
            return head + "\n", tail
    return None


def _head(state: _State, limit: int, measure: Measure) -> str:
    markers = _markers(state.opener, limit, measure) if state.inside else None
    return "" if markers is None else markers[0]


def _backtick_run(text: str, at: int) -> str:
    end = at
    while end < len(text) and text[end] == "`":
        end += 1
    return text[at:end]


def _content_start(text: str, at: int, end: int) -> int:
    while at < end and text[at].isspace():
        at += 1
    return at


def _starts_fence(text: str, at: int, end: int) -> bool:
    """``text[at:end]`` read as a line is a fence line."""
    return text.startswith(FENCE, _content_start(text, at, end), end)


# -- choosing a cut ----------------------------------------------------------------


class _Planner:
    """Picks the end of the chunk that starts at ``start``."""

    def __init__(self, text: str, start: int, state: _State, head: str, limit: int, measure: Measure) -> None:
        self.text = text
        self.start = start
        self.limit = limit
        self.measure = measure
        self.room = limit - measure(head)
        self.last = self._fit(self.room)  # furthest end if no closing marker is needed
        self.lines = self._lines(state)
        self.starts = [line.start for line in self.lines]
        self._fits_closed: dict[str, int] = {}

    def cut(self) -> _Cut:
        text, start, last = self.text, self.start, self.last
        if last == len(text):
            return self._cut_at(last)
        half = start + (last - start) // 2 + 1
        soft: list[Callable[[int], bool]] = [
            lambda q: q - 2 >= start and text.startswith("\n\n", q - 2) and self._not_empty_block(q),
            lambda q: text[q - 1] == "\n" and self._not_empty_block(q),
            lambda q: text[q - 1] == " " and not self._in_inline_code(q),
        ]
        for good in soft:
            found = self._search(half, good)
            if found is not None:
                return found
        for good in (lambda q: not _splits_cluster(text, q), lambda q: not _splits_surrogates(text, q)):
            found = self._search(start + 1, good)
            if found is not None:
                return found
        found = self._search(start + 1, lambda q: True, faithful_only=False)
        if found is not None:
            return found
        raise ValueError(f"limit {self.limit} is too small for the character at offset {start}")

    def _search(self, low: int, good: Callable[[int], bool], *, faithful_only: bool = True) -> _Cut | None:
        for q in range(self.last, low - 1, -1):
            if not good(q):
                continue
            cut = self._cut_at(q)
            if (cut.faithful or not faithful_only) and self._fits(cut) and self._decodable(cut):
                return cut
        return None

    def _cut_at(self, q: int) -> _Cut:
        text = self.text
        line = self.lines[bisect.bisect_left(self.starts, q) - 1]
        if q == line.end + 1:  # just after the newline: the whole line is in this chunk
            return _Cut(q, _after(text, line, line.fence), faithful=True)
        prefix_fence = text.startswith(FENCE, line.content, q)
        if line.fence:  # only its indentation or the whole line may go before the cut
            faithful = q <= line.content or q == line.end
        else:  # the rest must not turn into a fence line of its own
            faithful = not _starts_fence(text, q, line.end)
        return _Cut(q, _after(text, line, prefix_fence), faithful)

    def _fits(self, cut: _Cut) -> bool:
        if cut.at == len(self.text) or not cut.state.inside:
            return cut.at <= self.last
        markers = _markers(cut.state.opener, self.limit, self.measure)
        if markers is None:
            return False
        tail = markers[1]
        if tail not in self._fits_closed:
            self._fits_closed[tail] = self._fit(self.room - self.measure(tail))
        return cut.at <= self._fits_closed[tail]

    def _decodable(self, cut: _Cut) -> bool:
        """join_chunks must not mistake original text for a closing marker."""
        text, q = self.text, cut.at
        if q == len(text) or cut.state.inside or text[q] != "`":
            return True
        newline = text.rfind("\n", self.start, q)
        tail = text[newline + 1 : q]
        return newline < 0 or len(tail) < len(FENCE) or tail.strip("`") != ""

    def _not_empty_block(self, q: int) -> bool:
        """Cutting at this line start does not leave a code block empty on either side."""
        cut = self._cut_at(q)
        if not cut.state.inside:
            return True
        line = self.lines[bisect.bisect_left(self.starts, q) - 1]
        just_opened = line.fence and not line.before.inside
        closes_next = _starts_fence(self.text, q, _line_end(self.text, q))
        return not just_opened and not closes_next

    def _in_inline_code(self, q: int) -> bool:
        line = self.lines[bisect.bisect_left(self.starts, q) - 1]
        return not line.before.inside and not line.fence and self.text.count("`", line.start, q) % 2 == 1

    def _fit(self, room: int) -> int:
        """The furthest end whose text from ``start`` measures <= room."""
        text, start, measure = self.text, self.start, self.measure
        if room < 0:
            return start
        good, step = start, 1
        while True:  # gallop, so a chunk costs about its own length, not the text's
            probe = min(len(text), start + step)
            if measure(text[start:probe]) > room:
                bad = probe
                break
            good = probe
            if probe == len(text):
                return good
            step *= 2
        while bad - good > 1:
            mid = (good + bad) // 2
            if measure(text[start:mid]) <= room:
                good = mid
            else:
                bad = mid
        return good

    def _lines(self, state: _State) -> list[_Line]:
        text, out, at = self.text, [], self.start
        while True:
            end = _line_end(text, at)
            content = _content_start(text, at, end)
            line = _Line(at, end, content, text.startswith(FENCE, content, end), state)
            out.append(line)
            if end + 1 >= self.last or end == len(text):
                return out
            state = _after(text, line, line.fence)
            at = end + 1


def _after(text: str, line: _Line, toggles: bool) -> _State:
    if not toggles:
        return line.before
    if line.before.inside:
        return _State(inside=False, opener="")
    return _State(inside=True, opener=text[line.content : line.end].rstrip())


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


# -- characters --------------------------------------------------------------------


def _splits_cluster(text: str, q: int) -> bool:
    """A cut before ``text[q]`` would break what a reader sees as one character."""
    prev, nxt = text[q - 1], text[q]
    if prev == _ZWJ or (prev == "\r" and nxt == "\n") or _splits_surrogates(text, q):
        return True
    if _regional_indicator(prev) and _regional_indicator(nxt):
        # Flags are pairs of regional indicators: only an even count before the cut ends a flag.
        run = 0
        while q - run - 1 >= 0 and _regional_indicator(text[q - run - 1]):
            run += 1
        return run % 2 == 1
    code = ord(nxt)
    return (
        nxt == _ZWJ
        or 0xFE00 <= code <= 0xFE0F  # variation selectors (text/emoji presentation)
        or 0x1F3FB <= code <= 0x1F3FF  # skin tone modifiers
        or 0xE0020 <= code <= 0xE007F  # tag characters (subdivision flags)
        or 0xE0100 <= code <= 0xE01EF  # variation selectors supplement
        or unicodedata.category(nxt) in ("Mn", "Mc", "Me")  # combining marks
    )


def _splits_surrogates(text: str, q: int) -> bool:
    # Only text decoded with surrogatepass holds surrogates; keep a pair together.
    return 0xD800 <= ord(text[q - 1]) <= 0xDBFF and 0xDC00 <= ord(text[q]) <= 0xDFFF


def _regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF
