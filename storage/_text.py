"""Session ids and title cleaning: the same for every storage backend."""

from __future__ import annotations

import re
import secrets
import unicodedata
from datetime import datetime
from typing import Literal

from .errors import InvalidTitleError

MAX_TITLE_LENGTH = 100

# Zero-width characters and bidi controls can make two titles look equal or
# reorder what a person reads; they never belong in a title.
_INVISIBLE = {
    "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2060", "\ufeff",
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e",
    "\u2066", "\u2067", "\u2068", "\u2069", "\u061c",
}
_LINEAGE_SUFFIX = re.compile(r"^(?P<base>.*?) #(?P<n>\d+)$")


def new_session_id(kind: Literal["gateway", "terminal"] = "gateway", *, now: datetime | None = None) -> str:
    """``YYYYMMDD_HHMMSS_<hex>``: 8 hex digits for gateway sessions, 6 for the terminal."""
    stamp = (now or datetime.now()).strftime("%Y%m%d_%H%M%S")
    return f"{stamp}_{secrets.token_hex(4 if kind == 'gateway' else 3)}"


def clean_title(raw: str) -> str | None:
    """Strip control, zero-width and bidi characters, collapse whitespace.

    Returns None for a title that is empty after cleaning (meaning: clear it).
    """
    kept = []
    for ch in raw:
        if ch in _INVISIBLE:
            continue
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co"):
            kept.append(" " if ch in "\t\n\r\v\f" else "")
            continue
        kept.append(ch)
    title = " ".join("".join(kept).split())
    if not title:
        return None
    if len(title) > MAX_TITLE_LENGTH:
        raise InvalidTitleError(
            f"A title can be at most {MAX_TITLE_LENGTH} characters; this one has {len(title)}."
        )
    return title


def split_lineage_title(title: str) -> tuple[str, int]:
    """``"name #3"`` -> ``("name", 3)``; a bare name is number 1."""
    m = _LINEAGE_SUFFIX.match(title)
    if m:
        return m.group("base"), int(m.group("n"))
    return title, 1
