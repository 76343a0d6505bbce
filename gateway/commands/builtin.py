"""The commands every gateway has from the start: /help, /status, /stop."""

from __future__ import annotations

import time

from gateway.commands.background import stop_background
from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.routing.models import effective_model
from gateway.scheduler import JobOwner, jobs_of


async def _help(ctx: CommandContext) -> str:
    skills = ctx.services.skill_commands
    if skills is None:
        return ctx.commands.help_text()
    await skills.refresh()  # a skill installed since the last look is listed (and callable) at once
    return ctx.commands.help_text(skills.help_lines())


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{int(seconds)}s"
    if seconds < 5400:
        return f"{int(seconds // 60)}m"
    return f"{seconds / 3600:.1f}h"


async def _status(ctx: CommandContext) -> str:
    s = ctx.services
    session_id = await s.index.current(ctx.session_key)
    lines = []
    if session_id is None:
        lines.append("Session: none yet (your next message starts one)")
    else:
        session = await s.store.get_session(session_id) or {}
        count = session.get("message_count") or 0  # kept current by every append
        title = session.get("title") or "(untitled)"
        lines += [f"Session: {session_id}", f"Title: {title}", f"Messages: {count}"]
    model, _ = await effective_model(s.store, s.config.settings, ctx.message, session_id)  # what /model set too
    lines.append(f"Model: {model or 'not configured'}")
    if s.owners.is_owner(ctx.message.platform, ctx.message.user_id):
        lines.append("You are an owner of this bot (/pair approves strangers' codes)")
    running = "a reply is being written" if s.lanes.busy(ctx.session_key) else "idle"
    lines.append(f"This chat: {running}; {s.lanes.waiting(ctx.session_key)} message(s) waiting")
    asked = s.approvals.in_chat(ctx.message.platform, ctx.message.chat_id, ctx.message.thread_id)
    if asked:
        lines.append(f"Approvals waiting here: {', '.join(p.id for p in asked)} (/approve or /deny)")
    jobs = jobs_of(s)
    if jobs is not None:
        m = ctx.message
        viewer = JobOwner(m.platform, m.chat_id, m.thread_id, m.user_id, ctx.session_key, str(m.chat_type))
        nxt = jobs.status(viewer)["next"]
        if nxt is not None:
            lines.append(f"Next scheduled job: {nxt['name']} [{nxt['id']}] at {nxt['due_local']}")
    lines.append(
        f"Gateway: up {_ago(time.time() - s.started_at)}, {s.lanes.running} turn(s) running, "
        f"storage queue {s.store.writer.stats.queue_depth}"
    )
    conversion = s.store.writer.stats.fts_conversion
    if conversion is not None:
        done, total = conversion
        lines.append(f"Search index: moving to the compact layout, {done}/{total} messages "
                     f"({100 * done / max(1, total):.0f}%); search stays complete meanwhile")
    return "\n".join(lines)


async def _stop(ctx: CommandContext) -> str:
    if ctx.args.strip():  # /stop <id>: a background task of this chat
        return await stop_background(ctx, ctx.args.split()[0])
    stopped = await ctx.services.lanes.cancel_running(ctx.session_key)
    if stopped:
        return "⚡ Stopped. Everything said so far is kept; you can continue this session."
    return "Nothing is running in this chat."


def register_builtin_commands(registry: CommandRegistry) -> None:
    registry.register(Command("help", "list the commands", _help, immediate=True))
    registry.register(Command("status", "show this session and the gateway's state", _status, immediate=True))
    registry.register(Command("stop", "stop the reply being written now, or a background task by its id", _stop,
                              immediate=True, usage="[id]"))
