"""The ``session_search`` tool: recall past conversations straight from state.db.

No LLM call, no summary: every shape returns real messages. The shape follows
from which arguments are set (there is no mode parameter), as sessions.md
describes:

* discovery - ``query``: FTS5 search, one hit per session lineage, each with
  the snippet, the first and last three user/assistant messages (bookends) and
  ±5 messages around the match with the anchor flagged;
* scroll - ``session_id`` + ``around_message_id`` (+ ``window``): a slice of
  one session centred on a message;
* browse - no arguments: the most recent sessions with previews.

The current session and its lineage (the sessions it was compressed from or
into) are left out of discovery and browse: their content is already in the
model's context, and a hit there would only crowd out real recall.

Recall is private: every shape reads only the sessions the asking chat may
``/resume`` (the same rule, ``storage.ownership``: the sessions that lived in
this chat, as this person where the chat keeps a session per person; in the
terminal, those of the same login), so in a gateway with several users one
person's agent never quotes another's DMs. ``ToolContext.recall_all`` (a
single-user setup, an owner) lifts it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from storage import ChatOwner, Store, ownership
from storage.errors import AmbiguousSessionError, SessionNotFoundError, StorageError

from ._args import Args
from ._base import Tool, ToolContext, ToolError

_ROLES = ("user", "assistant", "tool", "system")
_DEFAULT_ROLES = ("user", "assistant")
_DISCOVERY_WINDOW = 5
_DISCOVERY_LIMIT, _BROWSE_LIMIT, _MAX_LIMIT = 3, 10, 20
_SCROLL_WINDOW, _MAX_WINDOW = 10, 50
_MAX_QUERY_CHARS = 1000
#: characters of message content one result may carry in total; each message
#: gets a fair share (so a few huge tool outputs cannot push the rest out),
#: never fewer than _MIN_SHARE
_CONTENT_BUDGET = 40_000
_MIN_SHARE, _MAX_SHARE = 300, 8_000

_DESCRIPTION = (
    "Search and read your past conversations (full-text FTS5). Use it when the user "
    "refers to something from an earlier conversation ('we did this before', 'last time', 'as I mentioned') or "
    "when prior context probably exists, before asking them to repeat themselves. Three shapes, chosen by the "
    "arguments you set: "
    "(1) discovery: query (FTS5 syntax: words are ANDed, \"exact phrase\", OR, NOT, prefix*; a term of 3+ "
    "characters that is no whole word matches inside words, e.g. netw) -> the top "
    "sessions with a snippet, bookend_start/bookend_end (first and last user/assistant messages: the goal and "
    "the outcome) and the messages around the match (anchor flagged, match_message_id); "
    "(2) scroll: session_id + around_message_id (+ window, default 10) -> the messages around that id; pass "
    "messages[0].id or messages[-1].id back to keep scrolling; messages_before/messages_after below window "
    "means you reached the start/end; "
    "(3) browse: no arguments -> recent sessions with previews ('what was I working on?'). "
    "sort: 'newest' for 'where did we leave X', 'oldest' for 'how did X start'; default is relevance. "
    "role_filter: comma-separated roles to search (default user,assistant; add tool to search tool output)."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "Discovery: what to search for (FTS5 syntax)."},
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": _MAX_LIMIT,
            "description": f"Sessions to return (discovery default {_DISCOVERY_LIMIT}, browse {_BROWSE_LIMIT}).",
        },
        "sort": {"type": "string", "enum": ["newest", "oldest"], "description": "Order by session date."},
        "role_filter": {
            "type": "string",
            "description": "Discovery: comma-separated roles to match, from user, assistant, tool, system.",
        },
        "session_id": {"type": "string", "description": "Scroll: the session (an id or unique id prefix)."},
        "around_message_id": {"type": "integer", "minimum": 1, "description": "Scroll: the anchor message id."},
        "window": {
            "type": "integer",
            "minimum": 0,
            "maximum": _MAX_WINDOW,
            "description": f"Scroll: messages on each side of the anchor (default {_SCROLL_WINDOW}).",
        },
    },
    "additionalProperties": False,
}


def _iso(ts: Any) -> str | None:
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        return None
    try:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return None


def _share(count: int, maximum: int = _MAX_SHARE) -> int:
    return max(_MIN_SHARE, min(maximum, _CONTENT_BUDGET // max(1, count)))


def _message(row: Mapping[str, Any], share: int) -> dict[str, Any]:
    out: dict[str, Any] = {"id": row["id"], "role": row["role"]}
    content = row.get("content")
    if isinstance(content, str) and len(content) > share:
        out["content"] = content[:share]
        out["truncated"] = f"{len(content) - share:,} more characters; scroll to this id with a window of 0"
    else:
        out["content"] = content
    if row.get("tool_name"):
        out["tool_name"] = row["tool_name"]
    out["timestamp"] = _iso(row.get("timestamp"))
    if row.get("anchor"):
        out["anchor"] = True
    return out


def _roles(text: str | None) -> list[str]:
    if text is None:
        return list(_DEFAULT_ROLES)
    roles = [r.strip().lower() for r in text.split(",") if r.strip()]
    bad = [r for r in roles if r not in _ROLES]
    if bad or not roles:
        raise ToolError(f"role_filter must be a comma-separated list of {', '.join(_ROLES)}; got {text!r}.")
    return list(dict.fromkeys(roles))


def _owner(ctx: ToolContext) -> ChatOwner | None:
    """The chat whose sessions this call may read; None when it may read every session."""
    if ctx.recall_all:
        return None
    return ChatOwner(ctx.session_key or "", ctx.platform, ctx.user_id)


async def _resolve(store: Store, owner: ChatOwner | None, id_or_prefix: str) -> str:
    """A session id from an id or unique prefix, among the sessions this call may read."""
    if owner is None:
        return await store.resolve_session_id(id_or_prefix)
    ids = await store.read(lambda c: ownership.owned_ids_by_prefix(c, owner, id_or_prefix, limit=11))
    if id_or_prefix in ids:
        return id_or_prefix
    if not ids:
        # The same words whether the session exists elsewhere or not at all.
        raise SessionNotFoundError(f"No session of this conversation's starts with '{id_or_prefix}'.")
    if len(ids) > 1:
        raise AmbiguousSessionError(id_or_prefix, ids)
    return ids[0]


async def _own_lineage(store: Store, session_id: str) -> set[str]:
    """The current session and every session of its lineage (root and all its descendants)."""
    ancestors = await store.lineage_ancestors(session_id)
    if not ancestors:
        return {session_id}
    root = str(ancestors[-1]["id"])
    return {session_id, *(str(r["id"]) for r in await store.lineage_descendants(root))}


async def _discovery(store: Store, ctx: ToolContext, query: str, limit: int, sort: str | None,
                     roles: Sequence[str]) -> dict[str, Any]:
    excluded = await _own_lineage(store, ctx.session_id)
    hits = await store.search_sessions(
        query, limit=limit, role_filter=roles, exclude_session_ids=sorted(excluded), sort=sort,
        window=_DISCOVERY_WINDOW, owner=_owner(ctx),
    )
    total = sum(len(h["bookend_start"]) + len(h["messages"]) + len(h["bookend_end"]) for h in hits)
    share = _share(total, 2_000)
    results = [
        {
            "session_id": h["session_id"],
            "title": h["title"],
            "when": _iso(h["when"]),
            "source": h["source"],
            "snippet": h["snippet"],
            "bookend_start": [_message(m, share) for m in h["bookend_start"]],
            "messages": [_message(m, share) for m in h["messages"]],
            "bookend_end": [_message(m, share) for m in h["bookend_end"]],
            "match_message_id": h["match_message_id"],
            "messages_before": h["messages_before"],
            "messages_after": h["messages_after"],
        }
        for h in hits
    ]
    out: dict[str, Any] = {"shape": "discovery", "query": query, "count": len(results), "results": results}
    if not results:
        out["hint"] = ("No past session matched. Try fewer or broader words, OR between alternatives, a prefix* "
                       "or role_filter 'user,assistant,tool'; session_search() with no arguments lists recent "
                       "sessions.")
    return out


async def _scroll(store: Store, ctx: ToolContext, session_id: str, around: int,
                  window: int) -> dict[str, Any]:
    try:
        resolved = await _resolve(store, _owner(ctx), session_id.strip())
    except StorageError as exc:
        raise ToolError(f"{exc} Use an id from a discovery or browse result.") from exc
    page = await store.messages_around(resolved, around, window)
    if not any(m["anchor"] for m in page["messages"]):
        raise ToolError(f"Message {around} is not part of session {resolved}; pass an id from that session's "
                        "messages (match_message_id, messages[0].id or messages[-1].id).")
    share = _share(len(page["messages"]))
    return {
        "shape": "scroll",
        "session_id": resolved,
        "around_message_id": around,
        "window": window,
        "messages": [_message(m, share) for m in page["messages"]],
        "messages_before": page["messages_before"],
        "messages_after": page["messages_after"],
    }


async def _browse(store: Store, ctx: ToolContext, limit: int, sort: str | None) -> dict[str, Any]:
    excluded = await _own_lineage(store, ctx.session_id)
    rows = await store.recent_sessions(limit=(limit + len(excluded)) * 3, owner=_owner(ctx))
    roots_seen: set[str] = set()
    sessions: list[dict[str, Any]] = []
    for row in rows:
        if row["id"] in excluded:
            continue
        # A compressed conversation is one lineage of several sessions; show its newest part once.
        ancestors = await store.lineage_ancestors(row["id"])
        root = str(ancestors[-1]["id"]) if ancestors else row["id"]
        if root in roots_seen:
            continue
        roots_seen.add(root)
        sessions.append(
            {
                "session_id": row["id"],
                "title": row.get("title"),
                "source": row.get("source"),
                "when": _iso(row.get("started_at")),
                "last_active": _iso(row.get("last_active")),
                "ended": row.get("ended_at") is not None,
                "end_reason": row.get("end_reason"),
                "message_count": row.get("message_count"),
                "preview": row.get("preview") or "",
            }
        )
        if len(sessions) >= limit:
            break
    if sort == "oldest":
        sessions.reverse()
    return {"shape": "browse", "count": len(sessions), "sessions": sessions,
            "hint": "Search one with session_search(query=...) or read it with session_id + around_message_id."}


async def _session_search(args: Mapping[str, Any], ctx: ToolContext) -> str:
    a = Args(args)
    query = a.text("query", max_chars=_MAX_QUERY_CHARS)
    session_id = a.text("session_id", max_chars=200)
    around = a.integer("around_message_id", minimum=1)
    sort = a.choice("sort", ("newest", "oldest"))
    store = ctx.store
    try:
        if session_id is not None or around is not None:
            if not session_id or not session_id.strip() or around is None:
                raise ToolError("Scrolling needs both session_id and around_message_id (from a discovery result).")
            window = a.integer("window", default=_SCROLL_WINDOW, minimum=0, maximum=_MAX_WINDOW)
            assert window is not None
            result = await _scroll(store, ctx, session_id, around, window)
        elif query is not None and query.strip():
            limit = a.integer("limit", default=_DISCOVERY_LIMIT, minimum=1, maximum=_MAX_LIMIT)
            assert limit is not None
            result = await _discovery(store, ctx, query, limit, sort, _roles(a.text("role_filter", max_chars=200)))
        else:
            limit = a.integer("limit", default=_BROWSE_LIMIT, minimum=1, maximum=_MAX_LIMIT)
            assert limit is not None
            result = await _browse(store, ctx, limit, sort)
    except (sqlite3.Error, StorageError) as exc:
        raise ToolError(f"The session database could not answer ({type(exc).__name__}); try a simpler query "
                        "or again in a moment.") from exc
    return json.dumps(result, ensure_ascii=False)


SESSION_SEARCH_TOOL = Tool(
    name="session_search",
    description=_DESCRIPTION,
    parameters=_PARAMETERS,
    handler=_session_search,
    toolset="session_search",
    max_result_chars=60_000,
)
