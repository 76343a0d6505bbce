"""/export-my-data and /forget-me: a sender's own data, taken out or erased (``gateway.userdata``).

/export-my-data builds the export off the event loop and sends it as a file to the sender's DM
(asked in a group, the group is told where it went, or why it could not go). /forget-me asks
first: a button where the platform has them (pressed, it arrives as ``/approve <id>`` or
``/deny <id>`` from the presser, so ``gateway.commands.approvals`` hands it here), or
``/forget-me confirm`` within two minutes. Both /forget-me forms are immediate: the check that
no turn of the sender runs (``Lanes.is_running``) must not wait behind one.
"""

from __future__ import annotations

import structlog

from adapters.approvals import ApprovalChoice, ApprovalPrompt
from adapters.base import Adapter, InboundMessage, OutboundMessage, SendKind
from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.routing.services import Services
from gateway.userdata import CONFIRM_PREFIX, CONFIRM_SECONDS, PendingForget, UserData, userdata_of
from storage import userdata

__all__ = ["CONFIRM_PREFIX", "answer_forget", "register_userdata_commands"]

log = structlog.get_logger("hermes.userdata")

_CHOICES: tuple[tuple[ApprovalChoice, str], ...] = (("approve", "🗑 Delete my data"), ("deny", "Cancel"))
_OFF = "Your data cannot be exported or deleted from here: this gateway runs without that part."
_NOBODY = "I cannot tell who sent this message, so there is no data of yours to find."


def _buttons(adapter: Adapter | None) -> bool:
    return adapter is not None and type(adapter).send_approval is not Adapter.send_approval


def _edits(adapter: Adapter | None) -> bool:
    return adapter is not None and type(adapter).settle_approval is not Adapter.settle_approval


async def _export(ctx: CommandContext) -> str | None:
    ud, msg = userdata_of(ctx.services), ctx.message
    if ud is None or ud.blobs is None:
        return _OFF
    if not msg.user_id:
        return _NOBODY
    sent = await ud.send_export(ctx.services, msg, owner=ctx.services.owners.is_owner(msg.platform, msg.user_id))
    if sent.chat_id is None:
        return ("I can send your data only to a direct message with me, and I have not talked with you in one on "
                "this platform yet: send /export-my-data to me there.")
    if not sent.ok:
        return ("I could not send the file to your direct messages (the platform refused). Open a direct chat with "
                "me (on Telegram: press Start), then send /export-my-data again.")
    return None if sent.same_chat else "📦 I sent your data to you in a direct message."


async def _forget(ctx: CommandContext) -> str | None:
    ud, msg = userdata_of(ctx.services), ctx.message
    if ud is None:
        return _OFF
    if not msg.user_id:
        return _NOBODY
    word = ctx.args.strip().lower()
    if word == "confirm":
        return await _answer(ctx, ud, None, "approve")
    if word == "cancel":
        return await _answer(ctx, ud, None, "deny")
    if word:
        return "Usage: /forget-me, then /forget-me confirm (or /forget-me cancel)"
    refusal = await _refusal(ctx.services, ud, msg, ctx.session_key)
    if refusal is not None:
        return refusal
    sessions = await ud.store.read(lambda c: userdata.sessions_of(c, msg.platform, msg.user_id or ""))
    alone = sum(1 for s in sessions if s.alone)
    pending = ud.confirmations.open(msg.platform, msg.user_id, msg.chat_id, msg.thread_id)
    text = (f"⚠️ Delete all your data here? That is {alone} conversation(s) of yours, your messages in "
            f"{len(sessions) - alone} shared one(s) (replaced by a note), your scheduled jobs and files. "
            f"It cannot be undone. /export-my-data first if you want a copy. "
            f"This question waits {int(CONFIRM_SECONDS // 60)} minutes.")
    adapter = ctx.services.adapters.get(msg.platform)
    if _buttons(adapter) and not msg.awaits_answer:
        assert adapter is not None
        target = OutboundMessage(msg.platform, msg.chat_id, "", msg.thread_id, msg.message_id, SendKind.NOTICE)
        pending.message_id = await adapter.send_approval(target, ApprovalPrompt(pending.id, text, _CHOICES))
        if pending.message_id is not None:
            return None
    return f"{text}\n\nSend /forget-me confirm to delete it all, or /forget-me cancel."


async def _refusal(services: Services, ud: UserData, msg: InboundMessage, key: str) -> str | None:
    if (msg.platform, msg.user_id) in ud.forgetting:
        return "Your data is being deleted right now; the report follows when it is done."
    if await ud.running_key(services, msg.platform, msg.user_id or "", key) is not None:
        return ("⏳ A reply is being written right now in a conversation of yours (here or in another chat). Wait "
                "for it (or /stop it), then try again.")
    return None


async def answer_forget(ctx: CommandContext, request_id: str, choice: ApprovalChoice) -> str | None:
    """A press of a /forget-me button (``/approve <id>``, ``/deny <id>``)."""
    ud = userdata_of(ctx.services)
    if ud is None:
        return _OFF
    return await _answer(ctx, ud, request_id, choice)


async def _answer(ctx: CommandContext, ud: UserData, request_id: str | None, choice: ApprovalChoice) -> str | None:
    msg = ctx.message
    taken = ud.confirmations.take(msg.platform, msg.user_id, request_id)
    if taken.status == "not_yours":
        return "⚠️ Only the person who asked to delete their data can answer that. It is still waiting."
    if taken.status == "none":
        return "No deletion of your data is waiting for an answer. Send /forget-me to start one."
    pending = taken.pending
    assert pending is not None
    if taken.status == "expired":
        await _settle(ctx, pending, "⌛ Not deleted: the two minutes to confirm have passed.")
        return "Too late: that request has expired (it waits two minutes). Send /forget-me again."
    if choice == "deny":
        await _settle(ctx, pending, "Cancelled: nothing was deleted.")
        return None if _shown(ctx, pending) else "Cancelled: nothing was deleted."
    refusal = await _refusal(ctx.services, ud, msg, ctx.session_key)
    if refusal is not None:
        ud.confirmations.put_back(pending)  # its button still works once the turn is over
        return refusal
    await _settle(ctx, pending, "🗑 Deleting your data…")
    sender = (pending.platform, pending.user_id)
    ud.forgetting.add(sender)
    if msg.awaits_answer:  # the HTTP API: the report is the answer to this request
        return await _forgotten(ctx.services, ud, pending)
    ud.spawn(_run(ctx.services, ud, pending, msg), name="userdata:forget")
    return None if _shown(ctx, pending) else "🗑 Deleting your data… the report follows."


def _shown(ctx: CommandContext, pending: PendingForget) -> bool:
    """Whether the question's message shows the outcome itself (edited buttons)."""
    return pending.message_id is not None and _edits(ctx.services.adapters.get(pending.platform)) \
        and not ctx.message.awaits_answer


async def _settle(ctx: CommandContext, pending: PendingForget, outcome: str) -> None:
    adapter = ctx.services.adapters.get(pending.platform)
    if pending.message_id is None or adapter is None or not _edits(adapter):
        return
    target = OutboundMessage(pending.platform, pending.chat_id, "", pending.thread_id, None, SendKind.NOTICE)
    try:
        await adapter.settle_approval(target, pending.message_id, outcome)
    except Exception as exc:  # the question stays as it was; the report still comes
        log.warning("userdata.settle_failed", error_type=type(exc).__name__)


async def _run(services: Services, ud: UserData, pending: PendingForget, confirmation: InboundMessage) -> None:
    if confirmation.delivery_key is not None:
        # The router records the confirming message as seen once this command returns: that record
        # (it names the sender) is written first, so that the forget deletes it too.
        await services.dedupe.settled(confirmation.platform, confirmation.delivery_key)
    text = await _forgotten(services, ud, pending)
    await services.delivery.send(OutboundMessage(pending.platform, pending.chat_id, text, pending.thread_id, None,
                                                 SendKind.NOTICE))


async def _forgotten(services: Services, ud: UserData, pending: PendingForget) -> str:
    """Forget the sender; the report (or what went wrong) for them."""
    owner = services.owners.is_owner(pending.platform, pending.user_id)
    try:
        report = await ud.forgetter.forget(pending.platform, pending.user_id,
                                           requested_by="the sender", forget_memory=owner)
        text = "\n".join(["✅ Your data is deleted:", *report.lines()])
    except Exception as exc:
        log.exception("userdata.forget_failed")
        text = (f"⚠️ Deleting your data failed ({type(exc).__name__}). Nothing is half-deleted: either nothing "
                "was (send /forget-me again), or the rest is finished when the gateway next starts.")
    finally:
        ud.forgetting.discard((pending.platform, pending.user_id))
    return text


def register_userdata_commands(registry: CommandRegistry) -> None:
    registry.register(Command("export_my_data", "get everything the gateway keeps of yours, as a file in your DM",
                              _export))
    registry.register(Command("forget_me", "delete everything the gateway keeps of yours (asks first)", _forget,
                              immediate=True, usage="[confirm|cancel]"))
