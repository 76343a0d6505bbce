"""The handoff state machine over its rows in state.db (``storage.handoffs``).

``pending -> claimed -> completed | failed``. Every transition is one
compare-and-set (``UPDATE ... WHERE id = ? AND state IN (...)``): whoever loses
a race changes nothing and learns it from the result, so a late timeout can
never overwrite a claimed or completed handoff.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable

from gateway.errors import HandoffInFlightError
from storage import HandoffRow, handoffs

ERROR_MAX_CHARS = 500

PENDING = "pending"
CLAIMED = "claimed"
COMPLETED = "completed"
FAILED = "failed"




def insert_pending(conn: sqlite3.Connection, *, session_id: str, source_key: str, source_platform: str,
                   source_chat_id: str | None, source_thread_id: str | None, target_platform: str,
                   target_chat_id: str | None) -> int:
    handoff_id = handoffs.insert_pending(
        conn, session_id=session_id, source_key=source_key, source_platform=source_platform,
        source_chat_id=source_chat_id, source_thread_id=source_thread_id, target_platform=target_platform,
        target_chat_id=target_chat_id, now=time.time(),
    )
    if handoff_id is None:  # one live handoff per session
        raise HandoffInFlightError(session_id)
    return handoff_id


def transition(conn: sqlite3.Connection, handoff_id: int, *, to: str, only_from: Iterable[str],
               error: str | None = None, **fields: str | None) -> bool:
    """Move a row to ``to`` if it is in one of ``only_from``; True if this call moved it."""
    return handoffs.set_state(conn, handoff_id, to=to, only_from=only_from,
                              error=None if error is None else error[:ERROR_MAX_CHARS], now=time.time(),
                              fields=fields)


def claim(conn: sqlite3.Connection, handoff_id: int) -> bool:
    return transition(conn, handoff_id, to=CLAIMED, only_from=(PENDING,))


def complete(conn: sqlite3.Connection, handoff_id: int, **fields: str | None) -> bool:
    return transition(conn, handoff_id, to=COMPLETED, only_from=(CLAIMED,), **fields)


def fail(conn: sqlite3.Connection, handoff_id: int, error: str, *, only_from: Iterable[str] = (CLAIMED,)) -> bool:
    return transition(conn, handoff_id, to=FAILED, only_from=only_from, error=error)


def fail_if_pending(conn: sqlite3.Connection, handoff_id: int, error: str) -> bool:
    """The timeout's transition: it may only ever fail a row nobody claimed."""
    return fail(conn, handoff_id, error, only_from=(PENDING,))


def fail_interrupted(conn: sqlite3.Connection, error: str) -> int:
    """At start-up: rows a previous process left live can never finish now."""
    return handoffs.set_state_of_all(conn, to=FAILED, only_from=(PENDING, CLAIMED), error=error[:ERROR_MAX_CHARS],
                                     now=time.time())


def get(conn: sqlite3.Connection, handoff_id: int) -> HandoffRow | None:
    return handoffs.get(conn, handoff_id)
