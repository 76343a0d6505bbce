"""Chat commands around a session: /queue, /compress, /sethome, /handoff."""

from __future__ import annotations

import contextlib

from adapters.base import OutboundMessage, SendKind
from gateway.errors import HandoffRefusedError
from gateway.routing.commands import Command, CommandContext, CommandRegistry

_QUEUE_SHOWN = 10
#: platforms that only answer requests: nothing can be delivered there unasked
_REQUEST_ONLY = frozenset({"api-server", "cli"})


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


async def _queue(ctx: CommandContext) -> str:
    lanes = ctx.services.lanes
    waiting = lanes.queued_labels(ctx.session_key)
    head = "A reply is being written now." if lanes.is_running(ctx.session_key) else "Nothing is running now."
    if not waiting:
        return f"{head}\nNothing is waiting."
    lines = [head, f"Waiting ({len(waiting)}), in order:"]
    for n, label in enumerate(waiting[:_QUEUE_SHOWN], 1):
        lines.append(f"{n}. {_one_line(label, 60) or '(empty)'}")
    if len(waiting) > _QUEUE_SHOWN:
        lines.append(f"… and {len(waiting) - _QUEUE_SHOWN} more")
    return "\n".join(lines)


async def _compress(ctx: CommandContext) -> str:
    s = ctx.services
    if s.compressor is None:
        return "Compression is not available yet in this gateway."
    session_id = await s.index.current(ctx.session_key)
    if session_id is None:
        return "Nothing to compress yet: this chat has no session."
    return await s.compressor.compress(s, ctx.session_key, session_id)


async def _sethome(ctx: CommandContext) -> str:
    msg = ctx.message
    homes = ctx.services.home_channels
    if msg.platform in _REQUEST_ONLY:
        return f"{msg.platform} only answers requests, so it cannot be a home channel."
    await homes.set(msg.platform, msg.chat_id, msg.thread_id, msg.chat_type, msg.user_id)
    where = msg.chat_name or msg.chat_id
    thread = f", thread {msg.thread_id}" if msg.thread_id else ""
    reply = f"✅ Home channel of {msg.platform} set to {where} (ID {msg.chat_id}{thread}).\n"
    adapter = ctx.services.adapters.get(msg.platform)
    problem: str | None = None
    with contextlib.suppress(Exception):  # only a courtesy: /handoff checks again
        problem = await adapter.handoff_refusal(msg.chat_id, msg.chat_type, msg.thread_id) if adapter else None
    if problem:  # said now, not only when a /handoff is refused later
        return reply + f"Note: /handoff {msg.platform} will be refused here: {problem}."
    return reply + f"Sessions handed over with /handoff {msg.platform} will continue here."


async def _handoff(ctx: CommandContext) -> str | None:
    s = ctx.services
    target = ctx.args.split()[0].lower() if ctx.args.split() else ""
    if not target:
        return ("Usage: /handoff <platform>\nMoves this session to that platform's home channel; "
                "come back later with /resume <title>.")
    if len(target) > 40:
        raise HandoffRefusedError("That is not a platform name.")
    msg = ctx.message

    async def announce() -> None:
        # An interim note; the outcome follows when the destination has answered.
        await s.delivery.send(
            OutboundMessage(msg.platform, msg.chat_id, f"⏳ Handing this session over to {target}…",
                            msg.thread_id, msg.message_id, SendKind.ACK)
        )

    await ctx.handoffs.request(msg, ctx.session_key, target, announce=announce)
    return None


def register_misc_commands(registry: CommandRegistry) -> None:
    registry.register(Command("queue", "show what waits in this chat", _queue, immediate=True))
    registry.register(Command("compress", "summarise a long session to free context", _compress))
    registry.register(Command("sethome", "make this chat the platform's home channel", _sethome,
                              immediate=True, aliases=("set_home",)))
    registry.register(Command("handoff", "move this session to another platform's home channel", _handoff,
                              immediate=True, usage="<platform>"))
