"""/approve [always] [id] and /deny [id]: the answer to a tool's approval question.

Both are immediate: the turn that asked waits in the chat's lane, so an answer queued behind it
would never come. A button press arrives as the same command (``adapters.approvals``), from the
person who pressed, so one path decides who may answer: the asker (same platform and user id) or
someone in ``tools.approvers``. Anyone else is told so, and the question keeps waiting.

Without an id the answer goes to the one question waiting in this chat (thread); with several
waiting the reply lists them. Sent outside any thread (a Slack slash command carries none) with
nothing waiting there, it takes the sender's own questions in the chat's threads. Where the adapter edits the question into its outcome (buttons), a
successful answer needs no reply of its own: the edited question says it, in place. A press of
/forget-me's buttons comes the same way, with an id of its own (``gateway.commands.userdata``).
"""

from __future__ import annotations

from adapters.approvals import ApprovalChoice
from adapters.base import Adapter
from gateway.commands.userdata import CONFIRM_PREFIX, answer_forget
from gateway.routing.approvals import PendingApproval, Resolution, shown_action
from gateway.routing.commands import Command, CommandContext, CommandRegistry

__all__ = ["register_approval_commands"]

_LISTED = 5


def _edits_in_place(adapter: Adapter | None) -> bool:
    """Whether this adapter shows an answer by editing the question (it overrides ``settle_approval``)."""
    return adapter is not None and type(adapter).settle_approval is not Adapter.settle_approval


async def _approve(ctx: CommandContext) -> str | None:
    words = ctx.args.split()
    choice: ApprovalChoice = "approve"
    if any(w.lower() == "always" for w in words):  # "/approve always <id>", "/approve <id> always" alike
        choice = "always"
        words = [w for w in words if w.lower() != "always"]
    if len(words) > 1:
        return "Usage: /approve [always] [id]"
    if words and words[0].startswith(CONFIRM_PREFIX):  # a /forget-me button
        return await answer_forget(ctx, words[0], "approve")
    return _answer(ctx, choice, words[0] if words else None)


async def _deny(ctx: CommandContext) -> str | None:
    words = ctx.args.split()
    if len(words) > 1:
        return "Usage: /deny [id]"
    if words and words[0].startswith(CONFIRM_PREFIX):
        return await answer_forget(ctx, words[0], "deny")
    return _answer(ctx, "deny", words[0] if words else None)


def _answer(ctx: CommandContext, choice: ApprovalChoice, approval_id: str | None) -> str | None:
    msg = ctx.message
    approvals = ctx.services.approvals
    if approval_id is None:
        waiting = approvals.in_chat(msg.platform, msg.chat_id, msg.thread_id)
        if not waiting and msg.thread_id is None:
            # A command that comes without its thread (a Slack slash command never says where it was
            # typed): this person's own questions in the chat's threads.
            threaded = approvals.in_threads(msg.platform, msg.chat_id)
            waiting = [p for p in threaded if approvals.may_answer(p, msg.platform, msg.user_id)]
            if threaded and not waiting:
                return "The approvals waiting in this chat's threads are not yours to answer."
        if not waiting:
            return "Nothing is waiting for an approval in this chat."
        if len(waiting) > 1:
            return _several(waiting, choice)
        approval_id = waiting[0].id
    resolution = approvals.answer(approval_id, choice, platform=msg.platform, user_id=msg.user_id,
                                  user_name=msg.user_name)
    return _reply(ctx, approval_id, resolution)


def _reply(ctx: CommandContext, approval_id: str, resolution: Resolution) -> str | None:
    pending = resolution.pending
    if resolution.status == "answered":
        assert pending is not None
        adapter = ctx.services.adapters.get(pending.platform)
        if pending.message_id is not None and _edits_in_place(adapter) and not ctx.message.awaits_answer:
            return None
        return f"{resolution.outcome}."
    if resolution.status == "not_allowed":
        assert pending is not None
        return (f"⚠️ Only {pending.asker} can answer this approval"
                f"{ctx.services.approvals.others(pending.platform)}. "
                "It is still waiting.")
    if resolution.status == "settled":
        if resolution.outcome is not None and resolution.outcome.startswith("⌛"):
            return f"Too late: approval {approval_id} has expired ({resolution.outcome})."
        ended = f" ({resolution.outcome})" if resolution.outcome else ""
        return f"Approval {approval_id} was already answered{ended}."
    return f"No approval {approval_id} is waiting (it may have ended with a restart of the gateway)."


def _several(waiting: list[PendingApproval], choice: ApprovalChoice) -> str:
    command = {"approve": "/approve", "always": "/approve always", "deny": "/deny"}[choice]
    lines = [f"{len(waiting)} approvals are waiting in this chat; name one:"]
    for pending in waiting[:_LISTED]:
        lines.append(f"• {command} {pending.id} — {pending.request.tool}: "
                     f"{shown_action(' '.join(pending.request.action.split()), 80)}")
    if len(waiting) > _LISTED:
        lines.append(f"… and {len(waiting) - _LISTED} more")
    return "\n".join(lines)


def register_approval_commands(registry: CommandRegistry) -> None:
    registry.register(Command("approve", "let a tool do what it asked about (always: in this session)",
                              _approve, immediate=True, usage="[always] [id]"))
    registry.register(Command("deny", "refuse what a tool asked about", _deny, immediate=True, usage="[id]"))
