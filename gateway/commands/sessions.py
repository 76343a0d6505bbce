"""Session commands: /title, /new, /reset, /resume, /sessions.

A chat may only see and resume its own sessions (unless
``sessions.allow_cross_user_resume``). A session belongs to the conversation
places it has lived in: the session keys it was ever bound to
(``gateway_session_bindings``). Keys already encode platform, chat, thread and,
where sessions are per user, the user, so "same key" is "same chat, and the
same person where the chat is not shared": a DM session can never be pulled
into a group, where its replies would be public, nor one person's group session
by another member.

The terminal is the exception the reference makes ("/resume <title>" brings a
handed-off session back to the desktop): every terminal connection is a new
chat, so there the owner is the login, and a terminal may resume the sessions
that lived in any terminal of the same login, and the cli sessions it started.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from gateway.routing.commands import Command, CommandContext, CommandRegistry
from storage import (
    AmbiguousSessionError,
    ChatOwner,
    InvalidTitleError,
    SessionNotFoundError,
    TitleConflictError,
    clean_title,
    ownership,
    queries,
    split_lineage_title,
)

_LIST_LIMIT = 10
_OWNED_SCAN = 200


# ------------------------------------------------------------------ ownership

def _owner(ctx: CommandContext) -> ChatOwner:
    return ChatOwner(ctx.session_key, ctx.message.platform, ctx.message.user_id)


def _owned_ids(conn: sqlite3.Connection, ctx: CommandContext) -> list[str]:
    return ownership.owned_ids(conn, _owner(ctx), limit=_OWNED_SCAN)


def _owns(conn: sqlite3.Connection, ctx: CommandContext, session_id: str) -> bool:
    return ownership.owns(conn, _owner(ctx), session_id)


def _owned_by_prefix(conn: sqlite3.Connection, ctx: CommandContext, prefix: str) -> list[str]:
    """Ids of this chat's sessions starting with ``prefix``, newest first (at most 11: enough
    to list a few and say there are more)."""
    return ownership.owned_ids_by_prefix(conn, _owner(ctx), prefix, limit=11)


def _owned_by_title(conn: sqlite3.Connection, ctx: CommandContext, title: str) -> str | None:
    """Like the store's title lookup (newest of a lineage for a bare name), among this chat's sessions."""
    base, _ = split_lineage_title(title)
    found = ownership.owned_titled(conn, _owner(ctx), title, base)
    exact = [r for r in found if r.title == title]
    if exact and title != base:
        return exact[0].id
    lineage = [r for r in found if split_lineage_title(r.title)[0] == base]
    if not lineage:
        return None
    return max(lineage, key=lambda r: (split_lineage_title(r.title)[1], r.started_at)).id


async def _may_use(ctx: CommandContext, session_id: str) -> bool:
    if ctx.services.config.settings.sessions.allow_cross_user_resume:
        return True
    return bool(await ctx.services.store.read(lambda c: _owns(c, ctx, session_id)))


def _label(session: dict[str, Any]) -> str:
    return f'"{session["title"]}"' if session.get("title") else str(session["id"])


def _ago(ts: float | None) -> str:
    if not ts:
        return "never"
    seconds = max(0.0, time.time() - float(ts))
    if seconds < 90:
        return "just now"
    if seconds < 5400:
        return f"{int(seconds // 60)}m ago"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.0f}h ago"
    return f"{seconds / 86400:.0f}d ago"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# ---------------------------------------------------------------------- /title

async def _title_in_use(ctx: CommandContext, title: str) -> bool:
    """Whether a session already has this title. Queued titles reserve nothing (a
    chat that never writes again must not hold a name forever); if another session
    takes the name first, the user hears it with their first reply."""
    return await ctx.services.store.read(lambda c: queries.title_in_use(c, title))


def _conflict_reply(title: str, suggestion: str) -> str:
    return f'⚠️ The title "{title}" is already in use. Pick another, for example "{suggestion}".'


async def _title(ctx: CommandContext) -> str:
    s = ctx.services
    session_id = await s.index.current(ctx.session_key)
    if not ctx.args:
        if session_id is None:
            pending = await s.index.pending_title(ctx.session_key)
            if pending:
                return f'No session yet; it will be titled "{pending}" when it starts.'
            return "No session yet. Usage: /title My Session Name"
        session = await s.store.get_session(session_id) or {}
        if session.get("title"):
            return f"📌 Session {session_id}\nTitle: {session['title']}"
        return f"📌 Session {session_id}\nNo title set. Usage: /title My Session Name"
    try:
        title = clean_title(ctx.args)
    except InvalidTitleError as exc:
        return f"⚠️ {exc}"
    if title is None:
        return "⚠️ That title is empty once control and invisible characters are removed. Use printable characters."
    if session_id is None:
        if await _title_in_use(ctx, title):
            return _conflict_reply(title, await s.store.get_next_title_in_lineage(title))
        await s.index.queue_title(ctx.session_key, title)
        return (f'✏️ Title "{title}" saved; it applies when this chat\'s session starts with your next message '
                "(if another session takes the name first, you will be told).")
    try:
        stored = await s.store.set_session_title(session_id, title)
    except TitleConflictError as exc:
        return _conflict_reply(exc.title, exc.suggestion)
    return f"✏️ Session title set: {stored}"


# ---------------------------------------------------------------- /new /reset

async def _start_fresh(ctx: CommandContext, end_reason: str, title_arg: str) -> str:
    s = ctx.services
    binding = await s.index.start_new(ctx.session_key, ctx.message, end_reason, model=s.model_name)
    saved = " The previous session is saved; /resume brings it back." if binding.previous_session_id else ""
    if not title_arg:
        session = await s.store.get_session(binding.session_id) or {}
        if session.get("title"):  # a title queued with /title before
            return f"✨ New session started: {session['title']}.{saved}"
        note = f"\n⚠️ {binding.title_note}" if binding.title_note else ""
        return f"✨ New session started.{saved}{note}"
    try:
        title = await s.store.set_session_title(binding.session_id, title_arg)
    except TitleConflictError as exc:
        return f"✨ New session started.{saved}\n" + _conflict_reply(exc.title, exc.suggestion)
    except InvalidTitleError as exc:
        return f"✨ New session started.{saved}\n⚠️ Title not set: {exc}"
    if title is None:
        return f"✨ New session started.{saved}\n⚠️ Title not set: it is empty once invisible characters are removed."
    return f"✨ New session started: {title}.{saved}"


async def _new(ctx: CommandContext) -> str:
    return await _start_fresh(ctx, "new", ctx.args)


async def _reset(ctx: CommandContext) -> str:
    return await _start_fresh(ctx, "reset", "")


# --------------------------------------------------------------------- /resume

async def _named_sessions(ctx: CommandContext) -> str:
    s = ctx.services
    ids = await s.store.read(lambda c: _owned_ids(c, ctx))
    sessions = [x for x in await s.store.recent_sessions(session_ids=ids, limit=len(ids) or 1) if x.get("title")]
    if not sessions:
        return ("No named sessions yet. Name this one with /title My Session, "
                "then /resume My Session brings it back later.")
    lines = ["Named sessions:"]
    for x in sessions[:_LIST_LIMIT]:
        preview = f" — {_one_line(x['preview'], 40)}" if x.get("preview") else ""
        lines.append(f"• {x['title']}{preview}")
    lines.append("Usage: /resume <title or id>")
    return "\n".join(lines)


async def _find(ctx: CommandContext, wanted: str) -> tuple[str | None, str | None]:
    """(session id, None) or (None, the reply explaining why not)."""
    s = ctx.services
    try:
        title = clean_title(wanted)
    except InvalidTitleError:
        title = None
    cross_user = s.config.settings.sessions.allow_cross_user_resume
    if title is not None:
        if not cross_user:
            found = await s.store.read(lambda c: _owned_by_title(c, ctx, title))
            if found is not None:
                return found, None
        by_title = await s.store.resolve_session_by_title(title)
        if by_title is not None:
            return by_title, None  # someone else's, unless allowed: the caller refuses it
    ref = wanted.strip()
    if await s.store.get_session(ref) is not None:
        return ref, None  # an exact id (the caller refuses it if it is someone else's)
    if not cross_user:
        return await _find_own_prefix(ctx, ref)
    try:
        return await s.store.resolve_session_id(ref), None
    except SessionNotFoundError:
        return None, _not_found(wanted)
    except AmbiguousSessionError as exc:
        return None, _ambiguous(wanted, exc.candidates)


async def _find_own_prefix(ctx: CommandContext, prefix: str) -> tuple[str | None, str | None]:
    if not prefix:
        return None, _not_found(prefix)
    mine = await ctx.services.store.read(lambda c: _owned_by_prefix(c, ctx, prefix))
    if len(mine) == 1:
        return mine[0], None
    if not mine:
        return None, _not_found(prefix)
    return None, _ambiguous(prefix, mine)


def _not_found(wanted: str) -> str:
    return (f'No session of this chat matches "{_one_line(wanted, 60)}". '
            "Send /resume alone to list your named sessions.")


def _ambiguous(wanted: str, candidates: list[str]) -> str:
    more = len(candidates) > 10  # the lookups stop at 11
    shown = ", ".join(candidates[:5]) + (" …" if len(candidates) > 5 else "")
    count = "more than 10" if more else str(len(candidates))
    return f'"{_one_line(wanted, 60)}" matches {count} sessions: {shown}. Give more characters.'


async def _resume(ctx: CommandContext) -> str:
    s = ctx.services
    if not ctx.args:
        return await _named_sessions(ctx)
    session_id, problem = await _find(ctx, ctx.args)
    if session_id is None:
        return problem or "Failed to switch session."
    session = await s.store.get_session(session_id)
    if session is None:
        return "That session no longer exists."
    if not await _may_use(ctx, session_id):
        # Nothing about the session itself (not its title, id or size): it is not ours to see.
        return ("⚠️ /resume refused: that session belongs to a different user or chat. "
                "You can only resume sessions from this chat.")
    if await s.index.current(ctx.session_key) == session_id:
        return f"📌 Already on session {_label(session)}."
    await s.index.rebind(ctx.session_key, session_id, ctx.message)
    count = session.get("message_count") or 0
    return f"↻ Resumed session {_label(session)} ({count} messages). The conversation continues from there."


# ------------------------------------------------------------------- /sessions

async def _sessions(ctx: CommandContext) -> str:
    s = ctx.services
    ids = await s.store.read(lambda c: _owned_ids(c, ctx))
    if not ids:
        return "No sessions yet: your next message starts one."
    current = await s.index.current(ctx.session_key)
    recent = await s.store.recent_sessions(session_ids=ids, limit=_LIST_LIMIT)
    lines = ["Your recent sessions:"]
    for x in recent:
        title = x.get("title") or "(untitled)"
        preview = f" — {_one_line(x['preview'], 40)}" if x.get("preview") else ""
        mark = " (current)" if x["id"] == current else ""
        lines.append(f"• {title}{mark}{preview} · {_ago(x.get('last_active'))} · {x['id']}")
    lines.append("Resume one with /resume <title or id>.")
    return "\n".join(lines)


def register_session_commands(registry: CommandRegistry) -> None:
    registry.register(Command("title", "show or set this session's title", _title, immediate=True,
                              usage="[name]"))
    registry.register(Command("new", "start a fresh session (optionally titled)", _new, usage="[title]"))
    registry.register(Command("reset", "start a fresh session", _reset))
    registry.register(Command("resume", "switch this chat to an earlier session", _resume,
                              usage="[title|id]"))
    registry.register(Command("sessions", "list your recent sessions", _sessions, immediate=True))
