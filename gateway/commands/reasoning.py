"""/reasoning on|off: show this session what the model reasoned before each answer (stored either way)."""

from __future__ import annotations

from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.routing.reasoning import reasoning_shown, set_reasoning_shown

__all__ = ["register_reasoning_commands"]

_USAGE = "Use /reasoning on or /reasoning off (or /reasoning alone to see which it is)."
_ON = ("on", "show", "yes", "true", "1")
_OFF = ("off", "hide", "no", "false", "0")


async def _reasoning(ctx: CommandContext) -> str:
    store = ctx.services.store
    session_id = await ctx.services.index.current(ctx.session_key)
    word = ctx.args.strip().lower()
    if word and word not in _ON + _OFF:
        return f"I do not know {ctx.args.strip()[:40]!r} here. {_USAGE}"
    if session_id is None:
        if not word:
            return "Reasoning is hidden (this chat has no session yet). " + _USAGE
        return "This chat has no session yet: send a message first, then /reasoning " + word + "."
    if not word:
        shown = await reasoning_shown(store, session_id)
        state = "shown before each answer" if shown else "hidden (it is kept with each answer)"
        return f"The model's reasoning is {state} in this session. {_USAGE}"
    shown = word in _ON
    await set_reasoning_shown(store, session_id, shown)
    if shown:
        return ("💭 Reasoning on: where the model reasons (reasoning models, <think> blocks), you see it before "
                "its answer. It lasts until /reasoning off or /new.")
    return "Reasoning off: only the answers are shown (the reasoning is still kept with them)."


def register_reasoning_commands(registry: CommandRegistry) -> None:
    registry.register(Command("reasoning", "show or hide the model's reasoning in this session", _reasoning,
                              usage="[on|off]"))
