"""Common Markdown (what models write) -> Slack mrkdwn.

Slack needs ``&``, ``<`` and ``>`` escaped everywhere (they delimit links and
mentions), renders ``*bold*``, ``_italic_``, ``~strike~``, ``<url|text>`` and
code as in Markdown, and has no headings or ``**``. Code (fenced blocks and
inline spans) is only escaped, never rewritten. Nothing is dropped: text the
rules do not recognise passes through as it is.
"""

from __future__ import annotations

import re

__all__ = ["mrkdwn_budget", "to_mrkdwn"]

_FENCE = re.compile(r"^\s*```")
_HEADING = re.compile(r"^(\s{0,3})#{1,6}\s+(.+?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?=\S)")
_LINK = re.compile(r"\[([^\[\]\n]+)\]\((https?://[^\s()<>]+|mailto:[^\s()<>]+)\)")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*\n]+?)(?<=[^\s*])\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
#: placeholders for converted bold while italics are converted (private-use characters)
_B_OPEN, _B_CLOSE = "\ue000", "\ue001"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def mrkdwn_budget(text: str) -> int:
    """An upper bound on ``len(to_mrkdwn(text))``, additive over concatenation.

    Escaping is the only rule that lengthens text (``&`` by 4, ``<``/``>`` by 3);
    every other rewrite keeps or shrinks the length.
    """
    return len(text) + 4 * text.count("&") + 3 * (text.count("<") + text.count(">"))


def to_mrkdwn(text: str) -> str:
    out: list[str] = []
    in_code = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_code = not in_code
            out.append(_escape(line))
        elif in_code:
            out.append(_escape(line))
        else:
            out.append(_prose_line(line))
    return "\n".join(out)


def _prose_line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"{heading.group(1)}*{_inline(heading.group(2), in_bold=True)}*"
    bullet = _BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(line[bullet.end():])}"
    return _inline(line)


def _inline(text: str, *, in_bold: bool = False) -> str:
    """Convert one line outside code blocks; inline code spans are kept as they are."""
    parts: list[str] = []
    pos = 0
    for code in _INLINE_CODE.finditer(text):
        parts.append(_styles(text[pos : code.start()], in_bold))
        parts.append(_escape(code.group(0)))
        pos = code.end()
    parts.append(_styles(text[pos:], in_bold))
    return "".join(parts)


def _styles(text: str, in_bold: bool) -> str:
    links: list[str] = []

    def keep_link(m: re.Match[str]) -> str:
        links.append(f"<{_escape(m.group(2))}|{_escape(m.group(1)).replace('|', '¦')}>")
        return f"\ue002{len(links) - 1}\ue003"

    text = _LINK.sub(keep_link, text)
    text = _escape(text)
    bold = (lambda m: m.group(2)) if in_bold else (lambda m: f"{_B_OPEN}{m.group(2)}{_B_CLOSE}")
    text = _BOLD.sub(bold, text)
    text = _ITALIC.sub(lambda m: f"_{m.group(1)}_", text)
    text = _STRIKE.sub(lambda m: f"~{m.group(1)}~", text)
    text = text.replace(_B_OPEN, "*").replace(_B_CLOSE, "*")
    return re.sub("\ue002(\\d+)\ue003", lambda m: links[int(m.group(1))], text)
