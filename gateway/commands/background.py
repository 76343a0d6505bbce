"""Background turns from a chat: /bg, and /stop <id> for one of them (``gateway.routing.background``
runs them)."""

from __future__ import annotations

import time

from gateway.routing.commands import Command, CommandContext, CommandRegistry

#: platforms that only answer requests: nothing can be delivered there unasked
REQUEST_ONLY = frozenset({"api-server", "cli"})


def _one_line(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _listing(ctx: CommandContext) -> str:
    assert ctx.turns is not None
    bg = ctx.turns.background
    running = bg.running_in(ctx.session_key)
    if not running:
        return ("No background task runs in this chat.\n"
                "Usage: /bg <prompt> — runs it in a session of its own; the answer comes here when it is done.")
    lines = [f"Background tasks running here ({len(running)} of at most {bg.limit}):"]
    for t in running:
        lines.append(f"• {t.id} — {_one_line(t.prompt)} ({int(time.time() - t.started_at)}s)")
    lines.append("/stop <id> stops one.")
    return "\n".join(lines)


async def _bg(ctx: CommandContext) -> str:
    if ctx.turns is None:
        return "/bg is not available in this gateway."
    bg = ctx.turns.background
    if bg.limit == 0:
        return "Background tasks are switched off in this gateway (gateway.max_background is 0)."
    prompt = ctx.args.strip()
    if not prompt:
        return _listing(ctx)
    if ctx.message.platform in REQUEST_ONLY:
        return (f"{ctx.message.platform} only answers requests, so a background answer would have nowhere to go. "
                "Send /bg from a chat platform.")
    task = await bg.start(ctx.message, ctx.session_key, prompt)
    if task is None:
        return (f"⏳ {bg.limit} background tasks already run in this chat, the most there may be. "
                "Wait for one to finish, or /stop <id> one (/bg lists them).")
    return (f"🔄 Background task {task.id} started. Its answer comes here when it is done; "
            f"this chat stays free meanwhile. /stop {task.id} stops it.")


async def stop_background(ctx: CommandContext, task_id: str) -> str:
    """/stop <id>: one background task of this chat."""
    if ctx.turns is None:
        return "Nothing is running with that id here."
    state = await ctx.turns.background.stop(ctx.session_key, task_id.strip().lower())
    if state is None:
        return f"No background task {_one_line(task_id, 20)!r} runs in this chat. /bg lists the ones that do."
    if state == "stopped":
        return f"⚡ Background task {task_id} stopped. What it did so far stays in its own session."
    return f"Background task {task_id} had just finished; its answer comes here."


def register_background_commands(registry: CommandRegistry) -> None:
    registry.register(Command("bg", "run a prompt in the background; its answer comes here when done", _bg,
                              immediate=True, usage="[prompt]", aliases=("background",)))
