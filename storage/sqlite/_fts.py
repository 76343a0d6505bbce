"""The FTS5 query sanitizer, and the CJK test that picks the trigram index."""

from __future__ import annotations

import re
import unicodedata

_OPERATORS = {"AND", "OR", "NOT"}
# Tokens: a quoted phrase, an operator-ish word, or a run of ordinary text.
_TOKEN = re.compile(r'"(?P<phrase>[^"]*)"|(?P<word>[^\s"]+)')


def _fts_term(text: str, prefix: bool) -> str | None:
    # Keep letters, digits and inner punctuation; anything FTS5 treats as
    # syntax is neutralised by quoting, never by guessing.
    text = text.replace('"', "")
    stripped = text.strip("()[]{}^:*+,;.!?'`~<>=|\\/@#$%&")
    if not any(c.isalnum() for c in stripped):
        return None
    return f'"{stripped}"' + ("*" if prefix else "")


def sanitize_fts5_query(query: str) -> str:
    """Turn arbitrary user text into an FTS5 query that cannot be a syntax error.

    Keeps what people mean: implicit AND between words, "quoted phrases",
    OR / NOT between terms, and ``prefix*``. Unmatched quotes and special
    characters are dropped, hyphenated or dotted terms become phrases
    (``chat-send`` -> ``"chat-send"``), and dangling operators are removed.
    Returns "" when nothing searchable is left.
    """
    # Surrogates and control characters cannot be encoded or mean nothing.
    query = "".join(
        " " if unicodedata.category(c) in ("Cc", "Cs") else c for c in query
    )
    if query.count('"') % 2:
        # The last quote is unmatched: drop it, keep the text.
        idx = query.rfind('"')
        query = query[:idx] + " " + query[idx + 1 :]
    parts: list[str] = []  # terms and operators, in order
    for m in _TOKEN.finditer(query):
        phrase = m.group("phrase")
        if phrase is not None:
            words = [w for w in (_fts_term(p, False) for p in phrase.split()) if w]
            if words:
                parts.append('"' + " ".join(w.strip('"') for w in words) + '"')
            continue
        word = m.group("word")
        if word in _OPERATORS:
            parts.append(word)
            continue
        term = _fts_term(word, prefix=word.endswith("*") and len(word.rstrip("*")) > 0)
        if term:
            parts.append(term)
    # Operators need a term on both sides; NOT/AND/OR never start or end a query.
    out: list[str] = []
    for part in parts:
        if part in _OPERATORS:
            if not out or out[-1] in _OPERATORS:
                continue
        out.append(part)
    while out and out[-1] in _OPERATORS:
        out.pop()
    return " ".join(out)


def has_cjk(text: str) -> bool:
    for ch in text:
        code = ord(ch)
        if (
            0x3040 <= code <= 0x30FF  # kana
            or 0x3400 <= code <= 0x4DBF
            or 0x4E00 <= code <= 0x9FFF
            or 0xAC00 <= code <= 0xD7AF  # hangul
            or 0xF900 <= code <= 0xFAFF
            or 0x20000 <= code <= 0x2FA1F
        ):
            return True
    return False
