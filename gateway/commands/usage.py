"""/usage: what this session has used of the model, from the token counts of every model call.

Each call's ``usage`` is added to the reference's token columns of ``sessions`` in the transaction
that stores the message it produced (``core._loop``), with its cost when its model has prices in
``models.allowed``: the figures here are those sums. Calls for titles and compression count too.
"""

from __future__ import annotations

from gateway.routing.commands import Command, CommandContext, CommandRegistry
from storage import usage

__all__ = ["describe_usage", "register_usage_commands"]


def describe_usage(totals: usage.UsageTotals, *, priced: bool) -> list[str]:
    """The lines /usage shows for ``totals`` (``priced``: some allowed model has prices)."""
    lines = [
        f"Model calls: {totals.api_calls}",
        f"Prompt tokens: {totals.input_tokens:,} (cached: {totals.cache_read_tokens:,})",
        f"Completion tokens: {totals.output_tokens:,}",
    ]
    if totals.cost_usd is not None:
        lines.append(f"Cost: ${totals.cost_usd:.4f}")
    elif priced:
        lines.append("Cost: none of these calls' models has prices in models.allowed")
    return lines


async def _usage(ctx: CommandContext) -> str:
    if ctx.args:
        return "Usage: /usage (this session's model calls, tokens and cost)"
    s = ctx.services
    session_id = await s.index.current(ctx.session_key)
    if session_id is None:
        return "No session yet: nothing used."
    totals = await s.store.read(lambda c: usage.session_totals(c, session_id))
    priced = any(m.prices is not None for m in s.config.settings.models.allowed)
    return "\n".join([f"📊 Session {session_id}", *describe_usage(totals, priced=priced)])


def register_usage_commands(registry: CommandRegistry) -> None:
    registry.register(Command("usage", "this session's model calls, tokens and cost", _usage, immediate=True))
