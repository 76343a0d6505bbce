"""Which sessions a chat may see and resume: those it has lived in.

A session belongs to every session key it was ever bound to
(``gateway_session_bindings``). On the terminal (platform ``cli``), where each
connection is a new chat, the owner is the login instead: a terminal owns the
sessions that lived in any terminal of the same user, and the cli sessions
that user started. ``gateway.commands.sessions`` explains why.

Only reads. SQLite's ``LIKE`` ignores ASCII case, and the lookups by prefix and by title
lineage rely on it, so they use ``ILIKE`` here.
"""

from __future__ import annotations

from typing import Any

from .._model import ChatOwner, SessionTitle
from ._conn import PgConnection

# The one rule, written once: named parameters for the lookups here, positional ones
# for the searches that filter on it next to their own "%s" parameters.
_OWNED_TEMPLATE = """
    SELECT s.id, s.started_at FROM gateway_session_bindings b JOIN sessions s ON s.id = b.session_id
    WHERE b.session_key = {key}
    UNION
    SELECT s.id, s.started_at FROM gateway_session_bindings b JOIN sessions s ON s.id = b.session_id
    WHERE {platform} = 'cli' AND b.platform = 'cli' AND b.user_id = {user}
    UNION
    SELECT id, started_at FROM sessions WHERE {platform} = 'cli' AND source = 'cli' AND user_id = {user}
"""
_OWNED_SQL = _OWNED_TEMPLATE.format(key="%(key)s::text", platform="%(platform)s::text", user="%(user)s::text")
_OWNED_POSITIONAL = ("SELECT id FROM (" + _OWNED_TEMPLATE.format(key="%s::text", platform="%s::text", user="%s::text")
                     + ") AS owned")


def _escape_like(text: str) -> str:
    """``text`` matched literally by ``LIKE %s ESCAPE '\\'``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _params(chat: ChatOwner) -> dict[str, Any]:
    return {"key": chat.session_key, "platform": chat.platform, "user": chat.user_id}


def owned_ids_sql(chat: ChatOwner) -> tuple[str, list[Any]]:
    """A subquery of the chat's session ids and its positional parameters, for a query that keeps
    only the chat's sessions (``... AND m.session_id IN (<sql>)``)."""
    return _OWNED_POSITIONAL, [chat.session_key, chat.platform, chat.user_id, chat.platform, chat.user_id]


def owned_ids(conn: PgConnection, chat: ChatOwner, *, limit: int) -> list[str]:
    """The chat's sessions, newest first."""
    rows = conn.execute(
        f"SELECT id FROM ({_OWNED_SQL}) AS owned ORDER BY started_at DESC LIMIT {int(limit)}", _params(chat)
    ).fetchall()
    return [str(r[0]) for r in rows]


def owns(conn: PgConnection, chat: ChatOwner, session_id: str) -> bool:
    row = conn.execute(f"SELECT 1 FROM ({_OWNED_SQL}) AS owned WHERE id = %(sid)s",
                       {**_params(chat), "sid": session_id})
    return row.fetchone() is not None


def owned_ids_by_prefix(conn: PgConnection, chat: ChatOwner, prefix: str, *, limit: int = 11) -> list[str]:
    """Ids of the chat's sessions starting with ``prefix``, newest first. Filtered in SQL, so
    other people's sessions sharing the prefix can neither crowd the chat's out nor show up."""
    rows = conn.execute(
        f"SELECT id FROM ({_OWNED_SQL}) AS owned WHERE id ILIKE %(like)s ESCAPE '\\' "
        f"ORDER BY started_at DESC LIMIT {int(limit)}",
        {**_params(chat), "like": _escape_like(prefix) + "%"},
    ).fetchall()
    return [str(r[0]) for r in rows]


def owned_titled(conn: PgConnection, chat: ChatOwner, title: str, base: str) -> list[SessionTitle]:
    """The chat's sessions titled ``title``, ``base`` or ``base #<n>`` (a title's lineage)."""
    rows = conn.execute(
        f"SELECT s.id, s.title, s.started_at FROM sessions s JOIN ({_OWNED_SQL}) o ON o.id = s.id "
        "WHERE s.title = %(base)s OR s.title = %(title)s OR s.title ILIKE %(like)s ESCAPE '\\'",
        {**_params(chat), "base": base, "title": title, "like": _escape_like(base) + " #%"},
    ).fetchall()
    return [SessionTitle(str(r["id"]), str(r["title"]), float(r["started_at"])) for r in rows]
