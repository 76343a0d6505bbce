"""Session administration writes: rename, delete, prune.

The same functions serve the daemon (its control socket calls them with the
daemon's own store, so the daemon stays the only writer) and the command line
when no daemon runs (it opens a Store, which takes the writer lock).
Results are plain JSON-serialisable dicts so they can cross the socket.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any

import structlog

from gateway.errors import InvalidPruneAgeError
from storage import InvalidTitleError, PrunePlan, PruneSkip, Store, clean_title, queries

log = structlog.get_logger("hermes.sessions_admin")

DEFAULT_PRUNE_DAYS = 90.0


def check_prune_age(older_than_days: float) -> float:
    try:
        days = float(older_than_days)
    except (TypeError, ValueError):
        raise InvalidPruneAgeError(f"--older-than must be a number of days, not {older_than_days!r}.") from None
    if not math.isfinite(days) or days < 0:
        raise InvalidPruneAgeError(f"--older-than must be a number of days >= 0, not {older_than_days!r}.")
    return days


def prune_plan(conn: sqlite3.Connection, older_than_days: float, source: str | None = None,
               *, now: float | None = None) -> PrunePlan:
    """What a prune deletes, and the old ended sessions it keeps because a kept session
    continues from them. The command line runs it on a read-only connection to say
    so before it asks; the prune itself uses the same query."""
    return queries.prune_plan(conn, older_than_days, source, now=now)


#: why a prune keeps an old ended session
LINEAGE_REASON = "compression lineage: /resume <title> and the 'X #2' title numbering follow it"


def skipped_rows(skipped: tuple[PruneSkip, ...]) -> list[dict[str, Any]]:
    return [{"session_id": s.session_id, "title": s.title, "continued_by": s.continued_by, "reason": "lineage"}
            for s in skipped]


def describe_skipped(skipped: list[dict[str, Any]]) -> list[str]:
    """Lines for a person: how many were kept and why, then one line each."""
    if not skipped:
        return []
    n = len(skipped)
    them, sessions_continue = ("it", "a session that is kept continues") if n == 1 else (
        "them", "sessions that are kept continue")
    lines = [f"Kept {n} old ended session{'s' if n != 1 else ''}, because {sessions_continue} from {them} "
             f"(deleting {them} would cut the {LINEAGE_REASON}):"]
    for row in skipped:
        title = f" '{row['title']}'" if row.get("title") else ""
        lines.append(f"  {row['session_id']}{title}, continued by {row['continued_by']}")
    return lines


async def rename(store: Store, id_or_prefix: str, title: str) -> dict[str, Any]:
    """Set a session's title. Raises SessionNotFoundError, AmbiguousSessionError,
    InvalidTitleError, or TitleConflictError (naming the session that has it)."""
    if clean_title(title) is None:
        # Clearing a title is /title's business; a rename always names something.
        raise InvalidTitleError("A title cannot be empty.")
    session_id = await store.resolve_session_id(id_or_prefix)
    before = await store.get_session(session_id)
    new_title = await store.set_session_title(session_id, title)
    log.info("sessions.renamed", session_id=session_id)
    return {
        "session_id": session_id,
        "title": new_title,
        "previous_title": before.get("title") if before else None,
    }


async def delete(store: Store, id_or_prefix: str) -> dict[str, Any]:
    """Delete one session and its messages. Raises SessionNotFoundError or
    AmbiguousSessionError. Sessions continued from it keep living, unlinked."""
    session_id = await store.resolve_session_id(id_or_prefix)
    session = await store.get_session(session_id)
    deleted = await store.delete_session(session_id)
    log.info("sessions.deleted", session_id=session_id, deleted=deleted)
    return {
        "session_id": session_id,
        "deleted": deleted,
        "title": session.get("title") if session else None,
        "message_count": (session.get("message_count") or 0) if session else 0,
    }


async def prune(store: Store, older_than_days: float, source: str | None) -> dict[str, Any]:
    """Delete ended sessions that started more than N days ago. Active ones never, nor
    one a kept session continues from (``skipped``, with the session that continues it)."""
    days = check_prune_age(older_than_days)
    source = source or None
    result = await store.prune(days, source)
    log.info("sessions.pruned", deleted=result.deleted, kept_for_lineage=len(result.skipped),
             older_than_days=days, source=source)
    return {"deleted": result.deleted, "older_than_days": days, "source": source,
            "skipped": skipped_rows(result.skipped)}

__all__ = [
    "DEFAULT_PRUNE_DAYS",
    "LINEAGE_REASON",
    "InvalidPruneAgeError",
    "check_prune_age",
    "delete",
    "describe_skipped",
    "prune",
    "prune_plan",
    "rename",
    "skipped_rows",
]
