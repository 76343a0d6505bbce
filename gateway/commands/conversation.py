"""Steering the conversation itself: /retry, /undo, /btw.

/retry and /undo change the session's history, so they refuse while anything runs or waits in
the chat's lane, and do their work as a job of that lane (nothing can slip in between the check
and the change). /btw changes nothing: it answers in a lane of its own beside the chat's.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from adapters.base import OutboundMessage, SendKind
from gateway.errors import describe
from gateway.logs import redact
from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.routing.lanes import Job
from gateway.routing.models import turn_model
from storage import history

log = structlog.get_logger("hermes.commands")

#: /undo takes back at most this many exchanges at once (more is "all of them" anyway)
UNDO_MAX = 1_000_000
BUSY = ("⏳ A reply is being written in this chat right now. Wait for it (or /stop it), "
        "then send /{name} again.")


async def _say(ctx: CommandContext, text: str, kind: SendKind = SendKind.NOTICE) -> None:
    m = ctx.message
    await ctx.services.delivery.send(OutboundMessage(m.platform, m.chat_id, redact(text), m.thread_id,
                                                     m.message_id, kind))


def _refusal(ctx: CommandContext, name: str) -> str | None:
    """Why /``name`` cannot change the history now; None: it may."""
    if ctx.turns is None:
        return f"/{name} is not available in this gateway."
    lanes = ctx.services.lanes
    if lanes.is_running(ctx.session_key) or lanes.busy(ctx.session_key):
        return BUSY.format(name=name)
    return None


def _queue(ctx: CommandContext, job_name: str, job: Job) -> None:
    ctx.services.lanes.submit(ctx.session_key, job, label=f"/{job_name}")


# ---------------------------------------------------------------- /retry


async def _retry(ctx: CommandContext) -> str | None:
    refused = _refusal(ctx, "retry")
    if refused:
        return refused
    s = ctx.services
    session_id = await s.index.current(ctx.session_key)
    if session_id is None:
        return "Nothing to retry: this chat has no conversation yet."
    last = await s.store.read(lambda c: history.last_exchange(c, session_id))
    if last is None:
        return "Nothing to retry: this conversation has no message of yours yet."
    if not last.answered and not last.retried:  # a retry a crash cut off may be retried
        return "Your last message has no answer yet, so there is nothing to retry. Send it again instead."
    turns = ctx.turns
    assert turns is not None

    async def job() -> None:
        now = await s.store.read(lambda c: history.last_exchange(c, session_id))
        if now != last or await s.index.current(ctx.session_key) != session_id:
            await _say(ctx, "The conversation changed before the retry could start; nothing was retried.")
            return
        await s.store.write(lambda c: history.supersede(c, session_id, last.answer_ids, now=time.time()))
        log.info("commands.retry", session_id=session_id, superseded=len(last.answer_ids))
        answered = False
        try:
            answered = await turns.answer_again(ctx.message, ctx.session_key, session_id, last.question)
        finally:
            if not answered:  # no new answer was stored: the old one stands again
                restored = await asyncio.shield(s.store.write(lambda c: history.restore_if_unanswered(
                    c, session_id, last.question_id, last.answer_ids, now=time.time())))
                if restored:
                    log.info("commands.retry_restored", session_id=session_id)

    _queue(ctx, "retry", job)
    return None


# ---------------------------------------------------------------- /undo


def _undo_count(args: str) -> int | None:
    word = args.strip()
    if not word:
        return 1
    if not word.isdigit() or not word.isascii() or int(word) < 1:
        return None
    return min(int(word), UNDO_MAX)


def _undo_reply(asked: int, done: history.Undone) -> str:
    what = "the last exchange" if done.exchanges == 1 else f"the last {done.exchanges} exchanges"
    gone = f"{done.messages} message{'s' if done.messages != 1 else ''}"
    if done.exchanges < asked:
        return (f"↩️ There {'was' if done.exchanges == 1 else 'were'} only {done.exchanges} "
                f"exchange{'s' if done.exchanges != 1 else ''} here: removed all of them ({gone}). "
                "This conversation is empty now.")
    return f"↩️ Removed {what} ({gone} in all)."


async def _undo(ctx: CommandContext) -> str | None:
    n = _undo_count(ctx.args)
    if n is None:
        return ("Usage: /undo [n] — takes back your last n messages and their answers (n is a whole "
                "number, 1 or more; 1 when left out).")
    refused = _refusal(ctx, "undo")
    if refused:
        return refused
    s = ctx.services
    session_id = await s.index.current(ctx.session_key)
    if session_id is None:
        return "Nothing to undo: this chat has no conversation yet."
    if await s.store.read(lambda c: history.last_exchange(c, session_id)) is None:
        return "Nothing to undo: this conversation has no message of yours yet."

    async def job() -> None:
        if await s.index.current(ctx.session_key) != session_id:
            await _say(ctx, "This chat moved to another conversation meanwhile; nothing was undone.")
            return
        try:
            done = await s.store.write(lambda c: history.undo(c, session_id, n))
        except Exception as exc:  # one transaction: nothing was removed
            log.warning("commands.undo_failed", error_type=type(exc).__name__)
            await _say(ctx, describe(exc).reply)
            return
        log.info("commands.undo", session_id=session_id, exchanges=done.exchanges, messages=done.messages)
        if done.exchanges == 0:
            await _say(ctx, "Nothing to undo: this conversation has no message of yours.")
        else:
            await _say(ctx, _undo_reply(n, done))

    _queue(ctx, "undo", job)
    return None


# ---------------------------------------------------------------- /btw


async def _btw(ctx: CommandContext) -> str | None:
    question = ctx.args.strip()
    if not question:
        return "Usage: /btw <question> — a side question about this conversation, answered without adding to it."
    s = ctx.services
    if s.side_questions is None:
        return "/btw is not available in this gateway."
    session_id = await s.index.current(ctx.session_key)
    if session_id is None:
        return "There is no conversation here yet to ask about: just send your question."
    side = s.side_questions
    m = ctx.message

    async def job() -> None:
        try:
            choice = await turn_model(s.store, s.config.settings, m, session_id)  # what /model chose here
            answer = await side.side_answer(s, session_id, m.platform, str(m.chat_type), question,
                                            model=choice.name if choice is not None else None)
        except Exception as exc:
            log.warning("commands.btw_failed", error_type=type(exc).__name__)
            await _say(ctx, describe(exc).reply)
            return
        await _say(ctx, f"💬 (by the way) {answer}" if answer.strip() else "💬 (by the way) No answer came.",
                   SendKind.NOTICE)

    # Its own lane: the chat's stays free, and a running turn does not hold the side answer up.
    s.lanes.submit(f"{ctx.session_key}:btw", job, label="/btw")
    return None


def register_conversation_commands(registry: CommandRegistry) -> None:
    registry.register(Command("retry", "answer your last message again (the old answer is set aside)", _retry,
                              immediate=True))
    registry.register(Command("undo", "take back your last n messages and their answers", _undo,
                              immediate=True, usage="[n]"))
    registry.register(Command("btw", "a side question on this conversation, not added to it", _btw,
                              immediate=True, usage="<question>"))
