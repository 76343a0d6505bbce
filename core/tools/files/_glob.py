"""Glob patterns as search_files reads them, turned into one regular expression.

``*`` and ``?`` stay inside one folder name, ``[abc]`` / ``[!abc]`` are sets, and ``**`` as a
whole part matches any number of folders (none included): ``**/*.py`` is every Python file,
``src/**/test_*.py`` the tests below src. A pattern without ``/`` matches a file's name in any
folder (``*.md``), the way people mean it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._base import ToolError

__all__ = ["Glob"]


def _segment(part: str) -> str:
    out: list[str] = []
    i, n = 0, len(part)
    while i < n:
        c = part[i]
        i += 1
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = i + 1 if i < n and part[i] in "!^" else i
            j = j + 1 if j < n and part[j] == "]" else j  # a ']' first in the set is a member
            end = part.find("]", j)
            if end == -1:
                out.append(re.escape(c))
                continue
            body = part[i:end]
            negate = body[:1] in ("!", "^")
            body = body[1:] if negate else body
            body = body.replace("\\", "\\\\").replace("[", "\\[")
            out.append(f"[{'^/' if negate else ''}{body}]")
            i = end + 1
        else:
            out.append(re.escape(c))
    return "".join(out)


@dataclass(frozen=True)
class Glob:
    """A compiled pattern; ``match`` takes a path relative to the searched folder, with '/'."""

    pattern: str
    _regex: re.Pattern[str]
    _name_only: bool

    @classmethod
    def compile(cls, pattern: str) -> Glob:
        text = pattern.strip()
        while text.startswith("./"):
            text = text[2:]
        if not text or text.startswith("/"):
            raise ToolError(f"'pattern' {pattern!r} must be a glob relative to 'path', such as '**/*.py'.")
        parts = [p for p in text.split("/") if p]
        out: list[str] = []
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            if part == "**":
                out.append(".*" if last else "(?:.*/)?")
            else:
                out.append(_segment(part) + ("" if last else "/"))
        try:
            regex = re.compile("".join(out) + r"\Z", re.DOTALL)
        except re.error as exc:
            raise ToolError(f"'pattern' {pattern!r} is not a valid glob ({exc}).") from None
        return cls(pattern, regex, "/" not in text)

    def match(self, relative: str) -> bool:
        subject = relative.rsplit("/", 1)[-1] if self._name_only else relative
        return self._regex.match(subject) is not None
