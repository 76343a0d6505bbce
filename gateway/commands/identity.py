"""/whoami (who the gateway takes you for) and /restart (an owner restarts the gateway)."""

from __future__ import annotations

import time

from adapters.base import OutboundMessage, SendKind
from gateway.logs import redact
from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.routing.restart import RestartNotice

__all__ = ["register_identity_commands"]

NOT_OWNER = "⛔ /restart is for the gateway's owners (auth.owners in config.yaml). Send /whoami to see who you are here."


def may_use(ctx: CommandContext, owner: bool) -> list[str]:
    """The commands this person may use: the built-ins (owner-only ones for owners) and the skills'."""
    names = [f"/{c.name}" for c in ctx.commands.all() if owner or not c.owner_only]
    if ctx.services.skill_commands is not None:
        names += [f"/{name}" for name, _ in ctx.services.skill_commands.help_lines()]
    return names


async def _whoami(ctx: CommandContext) -> str:
    m = ctx.message
    owner = ctx.services.owners.is_owner(m.platform, m.user_id)
    if ctx.services.skill_commands is not None:
        await ctx.services.skill_commands.refresh()
    lines = [
        f"Platform: {m.platform}",
        f"Your id: {m.user_id or 'none (this platform names no person)'}" + (f" ({m.user_name})" if m.user_name else ""),
        f"This chat: {m.chat_id} ({m.chat_type})" + (f", thread {m.thread_id}" if m.thread_id else ""),
        "Owner: yes" if owner else "Owner: no (owners are set by auth.owners in config.yaml)",
        "You may use: " + " ".join(may_use(ctx, owner)),
    ]
    return "\n".join(lines)


async def _restart(ctx: CommandContext) -> str | None:
    m, s = ctx.message, ctx.services
    if not s.owners.is_owner(m.platform, m.user_id):
        return NOT_OWNER
    if s.restart is None:
        return "This gateway cannot restart itself from a chat: it does not run as the daemon."
    if m.timestamp < int(s.started_at):
        # Sent before this process started (a redelivery of the /restart that started it, or one sent
        # while it was down): the restart it asked for has happened. Never a second one from it.
        # (Whole seconds: some platforms date their messages so; one in the second of the start counts.)
        return ("♻️ The gateway has started since you sent that /restart, so it is not restarted again. "
                "Send /restart once more if you still want a restart.")
    notice = RestartNotice(m.platform, m.chat_id, m.thread_id, m.message_id, time.time(), m.user_id)
    if not await s.restart.request(notice):
        return "♻️ A restart is already under way; I'll say here when I'm back."
    drain = s.config.settings.gateway.drain_timeout
    text = (f"♻️ Restarting: {s.lanes.running} running turn(s) may finish first (up to {drain:g} s). "
            "I'll say here when I'm back.")
    # Sent before the stop begins: once it has, adapters may be disconnecting.
    await s.delivery.send(OutboundMessage(m.platform, m.chat_id, redact(text), m.thread_id, m.message_id,
                                          SendKind.NOTICE))
    s.restart.stop()
    return None


def register_identity_commands(registry: CommandRegistry) -> None:
    registry.register(Command("whoami", "your platform id, whether you are an owner, the commands you may use",
                              _whoami, immediate=True))
    registry.register(Command("restart", "restart the gateway (owners only); it says when it is back",
                              _restart, immediate=True, owner_only=True))
