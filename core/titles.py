"""Auto-title: a short title for a new session, from the auxiliary model, once.

Runs in the background after the first exchange. A title set by hand (even
while this one is being written) always wins; a title that is already taken
gets the next lineage number (``X #2``).
"""

from __future__ import annotations

import re
import sqlite3
from typing import TYPE_CHECKING

import structlog

from storage import InvalidTitleError, TitleConflictError, clean_title, ops, queries

from .llm import ModelClient, Usage

if TYPE_CHECKING:
    from storage import Store

log = structlog.get_logger("hermes.titles")

TITLE_INSTRUCTIONS = (
    "Write a title of 3 to 7 words for the conversation below. Reply with the title only: "
    "no quotes, no punctuation at the end, no prefix like 'Title:'."
)

_MAX_WORDS = 7


def tidy_title(raw: str) -> str | None:
    """The model's answer as a title: first line, no quotes or 'Title:' prefix, at most 7 words."""
    line = next((ln for ln in raw.strip().splitlines() if ln.strip()), "")
    line = re.sub(r"^\s*(title\s*:\s*)", "", line, flags=re.IGNORECASE)
    line = line.strip().strip("\"'`*#").strip().rstrip(".!?:;,").strip()
    words = line.split()
    if not words:
        return None
    return " ".join(words[:_MAX_WORDS])


async def generate_title(
    client: ModelClient, user_text: str, reply_text: str, *, model: str | None
) -> tuple[str | None, Usage]:
    """A title for the exchange (None when the answer is unusable) and what the call cost."""
    excerpt = f"User: {user_text[:1500]}\nAssistant: {reply_text[:1500]}"
    result = await client.chat(
        [{"role": "system", "content": TITLE_INSTRUCTIONS}, {"role": "user", "content": excerpt}],
        model=model,
        max_tokens=30,
    )
    return tidy_title(result.content or ""), result.usage


def _usable(title: str | None) -> str | None:
    if title is None:
        return None
    try:
        return clean_title(title) or None
    except InvalidTitleError:
        return None


async def auto_title(
    store: Store, client: ModelClient, session_id: str, user_text: str, reply_text: str, *, model: str | None
) -> str | None:
    """Title ``session_id`` if it still has none; returns the title set, or None.

    The call's tokens are booked on the session whether or not its title is used.
    """
    raw, usage = await generate_title(client, user_text, reply_text, model=model)
    wanted = _usable(raw)

    def op(conn: sqlite3.Connection) -> str | None:
        # Checked and set in one transaction: a title set by hand meanwhile always wins.
        row = queries.get_session(conn, session_id)
        if row is None:
            return None  # deleted meanwhile: nothing left to bill or name
        ops.record_usage(conn, session_id, **usage.session_columns())
        if wanted is None or row["title"]:
            return None
        try:
            return ops.set_session_title(conn, session_id, wanted)
        except TitleConflictError:
            return ops.set_session_title(conn, session_id, ops.next_title_in_lineage(conn, wanted))

    return await store.write(op)
