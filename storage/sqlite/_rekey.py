"""Gateway migration 4: thread session keys in the format the reference documents.

Discord and Slack threads used to key as ``agent:<profile>:<platform>:thread:<chat>:<thread>``;
the reference's key table (sessions.md) has one row for every group thread or
topic, ``agent:main:<platform>:group:<chat_id>:<thread_id>``, and Telegram
topics already had it. Every table that holds a key is rewritten in the same
transaction, so an active thread keeps its session, the sessions it may
``/resume``, its queued title, its pending deliveries and handoffs, and its
learning counters.

Ids inside a key are escaped (``:`` -> ``%3A``), so ``:`` only ever separates
segments and the chat type is always the fourth segment.
"""

from __future__ import annotations

import sqlite3

_FN = "hg_documented_key"
_LEARNING = "learning:"


def documented_key(key: str | None) -> str | None:
    """``key`` with a ``thread`` chat type written as ``group``; any other key unchanged."""
    if key is None:
        return None
    parts = key.split(":")
    if len(parts) >= 4 and parts[0] == "agent" and parts[3] == "thread":
        parts[3] = "group"
        return ":".join(parts)
    return key


def _documented_meta_key(key: str | None) -> str | None:
    if key is None or not key.startswith(_LEARNING):
        return key
    return _LEARNING + (documented_key(key[len(_LEARNING):]) or "")


def _rekey_unique(conn: sqlite3.Connection, table: str, column: str, fn: str) -> None:
    """Rename keys of a table where the key is unique; where the new key is taken already
    (it cannot be in a file the old code wrote, but a file is never trusted) it is kept."""
    conn.execute(f"UPDATE OR IGNORE {table} SET {column} = {fn}({column}) WHERE {fn}({column}) != {column}")
    conn.execute(f"DELETE FROM {table} WHERE {fn}({column}) != {column}")


def rekey_threads(conn: sqlite3.Connection) -> None:
    conn.create_function(_FN, 1, documented_key, deterministic=True)
    conn.create_function(_FN + "_meta", 1, _documented_meta_key, deterministic=True)
    try:
        # The routing index: where both forms exist, the more recently bound one wins.
        conn.execute(
            f"DELETE FROM gateway_session_index WHERE EXISTS (SELECT 1 FROM gateway_session_index o "
            f"WHERE o.session_key != gateway_session_index.session_key "
            f"AND {_FN}(o.session_key) = gateway_session_index.session_key "
            f"AND o.updated_at > gateway_session_index.updated_at)"
        )
        _rekey_unique(conn, "gateway_session_index", "session_key", _FN)
        _rekey_unique(conn, "gateway_pending_titles", "session_key", _FN)
        _rekey_unique(conn, "state_meta", "key", _FN + "_meta")
        # Bindings are (key, session) pairs: a pair that exists in both forms is one binding.
        _rekey_unique(conn, "gateway_session_bindings", "session_key", _FN)
        conn.execute(f"UPDATE gateway_outbound SET session_key = {_FN}(session_key) "
                     f"WHERE {_FN}(session_key) != session_key")
        conn.execute(f"UPDATE gateway_handoffs SET source_key = {_FN}(source_key), target_key = {_FN}(target_key) "
                     f"WHERE {_FN}(source_key) != source_key OR {_FN}(target_key) != target_key")
    finally:
        conn.create_function(_FN, 1, None)
        conn.create_function(_FN + "_meta", 1, None)
