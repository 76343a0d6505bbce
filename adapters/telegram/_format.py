"""Common Markdown -> Telegram MarkdownV2, with full escaping.

What a model writes is CommonMark-ish Markdown; what Telegram parses is
MarkdownV2, where every reserved character outside an entity must be escaped
and a stray one makes the whole message fail (``can't parse entities``). This
module converts the constructs people use and escapes everything else:

=====================  =====================  ====================================
Markdown               MarkdownV2             notes
=====================  =====================  ====================================
fenced code block      ```lang ... ```        fences read line by line, as in
                                              ``adapters._split``; only ` and \\
                                              are escaped inside
```inline code```      `code`                 any backtick run, closed by a run
                                              of the same length on the line
``**bold**``           ``*bold*``             (``__x__`` stays literal: dunders)
``*italic*``           ``_italic_``           also ``_italic_`` at word bounds
``~~strike~~``         ``~strike~``
``[text](url)``        ``[text](url)``        http(s)://, tg://, mailto: only;
                                              only ) and \\ escaped in the url
``# Heading``          ``*Heading*``          levels 1-6
=====================  =====================  ====================================

Everything else (lists, quotes, tables, stray markers, backslashes) is kept
as literal text, escaped. Emphasis never spans lines and never contains code
(Telegram forbids code inside other entities). Unbalanced markers stay
literal, so a chunk cut in the middle of ``**bold`` still converts cleanly.

``markdown_v2_budget`` is an additive upper bound on the UTF-16 length of the
converted text (each escapable character may cost one more unit), used to
split replies so that even the escaped text fits Telegram's limit (Telegram
counts the limit after parsing; a fake or proxy that counts the raw text is
satisfied too).
"""

from __future__ import annotations

import re

from .._split import FENCE, utf16_len

__all__ = ["RESERVED", "escape", "escape_code", "escape_url", "expandable_quote", "markdown_v2_budget",
           "to_markdown_v2"]

#: Characters MarkdownV2 reserves outside entities (plus the backslash itself).
RESERVED = frozenset("_*[]()~`>#+-=|{}.!\\")

_ESCAPE_RE = re.compile(r"([_*\[\]()~`>#+\-=|{}.!\\])")
_CODE_ESCAPE_RE = re.compile(r"([`\\])")
_URL_ESCAPE_RE = re.compile(r"([)\\])")
_LANG_RE = re.compile(r"[A-Za-z0-9_+\-#.]{1,32}")
_HEADING_RE = re.compile(r"([ \t]{0,3})(#{1,6})[ \t]+(\S.*?)[ \t]*$")
_URL_SCHEMES = ("http://", "https://", "tg://", "mailto:")


def escape(text: str) -> str:
    """Escape ``text`` for use outside entities (every reserved character)."""
    return _ESCAPE_RE.sub(r"\\\1", text)


def escape_code(text: str) -> str:
    """Escape ``text`` for use inside ``code`` and ``pre`` entities (only ` and \\)."""
    return _CODE_ESCAPE_RE.sub(r"\\\1", text)


def escape_url(url: str) -> str:
    """Escape ``url`` for the (...) part of an inline link (only ) and \\)."""
    return _URL_ESCAPE_RE.sub(r"\\\1", url)


def expandable_quote(heading: str, text: str) -> str:
    """``heading`` in bold, then ``text`` in an expandable blockquote (``**>`` ... ``||``): shown
    folded to a few lines until the reader opens it (the model's reasoning)."""
    lines = [escape(line) for line in text.strip().split("\n")] or [""]
    quoted = "**>" + "\n>".join(lines) + "||"
    return f"*{escape(heading)}*\n{quoted}"


def markdown_v2_budget(text: str) -> int:
    """An upper bound on ``utf16_len(to_markdown_v2(text))``; additive over concatenation.

    An escaped character costs one unit more. A backtick is counted three
    times: an unclosed code block is closed in the output (three more
    characters, paid for by its opening fence) and an unusual info string moves
    onto a line of its own (one more newline).
    """
    return utf16_len(text) + sum(1 for ch in text if ch in RESERVED) + text.count("`")


def to_markdown_v2(text: str) -> str:
    """``text`` (Markdown) as MarkdownV2 that Telegram parses without error."""
    out: list[str] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if _fence_line(line):
            close = next((j for j in range(i + 1, len(lines)) if _fence_line(lines[j])), None)
            out.append(_code_block(lines, i, close))
            if close is None:
                break
            i = close + 1
        else:
            out.append(_prose_line(line))
            i += 1
        if i < len(lines):
            out.append("\n")
    return "".join(out)


# -- code blocks ---------------------------------------------------------------------


def _fence_line(line: str) -> bool:
    return line.lstrip().startswith(FENCE)


def _code_block(lines: list[str], start: int, close: int | None) -> str:
    """The block from the fence line ``start`` to the fence line ``close`` (None: to the end)."""
    opener = lines[start]
    indent = opener[: len(opener) - len(opener.lstrip())]
    info = opener.lstrip().lstrip("`").strip()
    body = lines[start + 1 : close] if close is not None else lines[start + 1 :]
    content = "\n".join(body)
    if not content.strip():
        # An empty block shows nothing in Telegram and would drop its info string: keep it as text.
        end = close if close is not None else len(lines) - 1
        return "\n".join(_prose_line(line) for line in lines[start : end + 1])
    if close is not None and body:
        content += "\n"  # the newline before the closing fence stays inside, as written
    if info and not _LANG_RE.fullmatch(info):
        # Telegram would take the first word as the language; keep the whole line as code instead.
        content = info + "\n" + content
        info = ""
    head = escape(indent) + FENCE + info + "\n"
    if close is None:
        return head + escape_code(content) + FENCE
    closer = lines[close]
    close_indent = closer[: len(closer) - len(closer.lstrip())]
    rest = closer.lstrip().lstrip("`")
    # The closing line's indentation is shown inside the block, where it was.
    return head + escape_code(content + close_indent) + FENCE + _prose_line(rest)


# -- prose -------------------------------------------------------------------------


def _prose_line(line: str) -> str:
    heading = _HEADING_RE.fullmatch(line)
    if heading is not None:
        indent, _, title = heading.groups()
        return escape(indent) + "*" + escape(title) + "*"
    return _Inline(line).convert()


def _word_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


class _Inline:
    """Converts one line of prose. Entities are matched left to right, innermost allowed set shrinking."""

    def __init__(self, text: str) -> None:
        self.text = text

    def convert(self) -> str:
        return self._run(0, len(self.text), code=True, bold=True, italic=True, strike=True, links=True)

    def _run(self, start: int, end: int, *, code: bool, bold: bool, italic: bool, strike: bool,
             links: bool) -> str:
        text = self.text
        out: list[str] = []
        i = start
        while i < end:
            ch = text[i]
            if ch == "`" and code:
                run = _run_length(text, i, end, "`")
                close = _find_run(text, i + run, end, "`", run)
                if close is not None:
                    out.append("`" + escape_code(text[i + run : close]) + "`")
                    i = close + run
                    continue
                out.append(escape(text[i : i + run]))
                i += run
                continue
            if ch == "[" and links:
                link = self._link(i, end)
                if link is not None:
                    label_end, url, after = link
                    out.append("[" + escape(text[i + 1 : label_end]) + "](" + escape_url(url) + ")")
                    i = after
                    continue
            if ch in "*_~":
                converted = self._emphasis(i, end, out, bold=bold, italic=italic, strike=strike)
                if converted is not None:
                    i = converted
                    continue
            out.append(escape(ch))
            i += 1
        return "".join(out)

    def _emphasis(self, i: int, end: int, out: list[str], *, bold: bool, italic: bool, strike: bool) -> int | None:
        """Convert the emphasis opening at ``i`` into ``out``; the index after it, or None."""
        text = self.text
        ch = text[i]
        double = text.startswith(ch * 2, i)
        if ch == "~":
            if not (double and strike):
                return None
            close = self._closer(i + 2, end, "~~", word_bound=False)
            if close is None:
                return None
            inner = self._run(i + 2, close, code=False, bold=bold, italic=italic, strike=False, links=False)
            out.append("~" + inner + "~")
            return close + 2
        word_bound = ch == "_"
        if word_bound and i > 0 and _word_char(text[i - 1]):
            return None
        if double and (ch == "_" or text.startswith(ch * 3, i)):
            # __x__ is more often a Python dunder than bold; *** is ambiguous: both stay literal.
            return None
        if double:
            if not bold:
                return None
            close = self._closer(i + 2, end, ch * 2, word_bound=word_bound)
            if close is None:
                return None
            inner = self._run(i + 2, close, code=False, bold=False, italic=italic, strike=strike, links=False)
            out.append("*" + inner + "*")
            return close + 2
        if not italic:
            return None
        close = self._closer(i + 1, end, ch, word_bound=word_bound)
        if close is None:
            return None
        if out and out[-1].endswith("_") and not out[-1].endswith("\\_"):
            return None  # "_a__b_" would read as underline: keep the second one literal
        inner = self._run(i + 1, close, code=False, bold=bold, italic=False, strike=strike, links=False)
        out.append("_" + inner + "_")
        return close + 1

    def _closer(self, start: int, end: int, marker: str, *, word_bound: bool) -> int | None:
        """The first valid closing ``marker`` after a valid opening one ending at ``start``."""
        text = self.text
        if start >= end or text[start].isspace():
            return None
        ch = marker[0]
        j = start
        while True:
            j = text.find(marker, j, end)
            if j < 0:
                return None
            run = _run_length(text, j, end, ch)
            before_ok = j > start and not text[j - 1].isspace()
            if run == len(marker) and before_ok and not (j > 0 and text[j - 1] == ch):
                after = j + len(marker)
                if not (word_bound and after < len(text) and _word_char(text[after])):
                    return j
            j += run

    def _link(self, i: int, end: int) -> tuple[int, str, int] | None:
        """``[label](url)`` at ``i``: (index of "]", url, index after ")"), or None."""
        text = self.text
        label_end = text.find("](", i + 1, end)
        if label_end <= i + 1 or "[" in text[i + 1 : label_end] or "]" in text[i + 1 : label_end]:
            return None
        depth, j = 0, label_end + 2
        while j < end:
            c = text[j]
            if c.isspace():
                return None
            if c == "(":
                depth += 1
            elif c == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        else:
            return None
        url = text[label_end + 2 : j]
        if not url.lower().startswith(_URL_SCHEMES) or len(url) <= len("tg://"):
            return None
        return label_end, url, j + 1


def _run_length(text: str, at: int, end: int, ch: str) -> int:
    j = at
    while j < end and text[j] == ch:
        j += 1
    return j - at


def _find_run(text: str, start: int, end: int, ch: str, length: int) -> int | None:
    """The start of the next run of exactly ``length`` ``ch`` in ``text[start:end]``, with content before it."""
    j = start
    while j < end:
        j = text.find(ch, j, end)
        if j < 0:
            return None
        run = _run_length(text, j, end, ch)
        if run == length and j > start:
            return j
        j += run
    return None
