"""The path of one message: authorize -> dedupe -> session key -> command? -> parked -> lane.

Every inbound message from every adapter comes through ``Router.handle``. It
never raises into an adapter: bad input gets a log line and, where a person
is waiting, a clear reply. What a crash or a stop left parked comes through
``Router.replay`` at the next start (``gateway.routing.parking``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

import structlog

from adapters.base import ChatType, Disposition, InboundMessage, OutboundMessage, SendKind
from gateway.errors import (
    BadInputError,
    ChatBusyError,
    DuplicateRequestError,
    GatewayError,
    InputTooLongError,
    LaneFullError,
    LanesClosedError,
    describe,
)
from gateway.logs import redact
from gateway.routing.auth import Authorizer, Decision
from gateway.routing.commands import CommandContext, CommandRegistry, parse_command
from gateway.routing.lanes import Job
from gateway.routing.parking import Parking, ParkTicket
from gateway.routing.services import Handoffs, Services, SkillCall
from gateway.routing.session_key import build_session_key
from gateway.routing.turns import Turns
from storage.errors import StorageClosedError, StorageUnavailableError

log = structlog.get_logger("hermes.router")

QUEUED_ACK = "⏳ Queued — I'll answer after the current reply."
#: Storage away (the database server gone, or the writer stopped): nothing of the message is
#: stored, and a platform that redelivers may as well be asked to (``Disposition.DEFERRED``).
_AWAY = (StorageUnavailableError, StorageClosedError)
MAX_INPUT_CHARS = 32_000


class _Claim:
    """What became of a claimed message: a job in its lane (a turn recorded with its question, a
    command once it ran), answered here (recorded at once), or released unprocessed (a
    redelivery counts). ``parked``: its row until it is answered."""

    def __init__(self, parked: ParkTicket | None = None) -> None:
        self.outcome: Literal["answered", "turn", "released"] = "answered"
        self.parked = parked


class Router:
    """Intake: every message of every adapter, up to the moment its work waits in a lane."""

    def __init__(self, services: Services, authorizer: Authorizer, turns: Turns,
                 commands: CommandRegistry, handoffs: Handoffs) -> None:
        self.services = services
        self._auth = authorizer
        self._keys = services.key_settings
        self._turns = turns
        self._commands = commands
        self._handoffs = handoffs
        self._metrics = services.metrics
        self._accepting = True
        self._parking = Parking(services.store, services.lanes, services.adapters)

    def stop_intake(self) -> None:
        self._accepting = False
        self._turns.stop_intake()

    # ------------------------------------------------------------------ intake

    async def replay(self) -> int:
        """At start, before any platform connects: take again, in order, each message a crash or a
        stop left parked (its platform will not bring it again). How many went into a lane."""
        return await self._parking.replay(self.handle)

    async def aclose(self) -> None:
        """What a job left to write beside its lane (its dedupe record, its parked row), before the store closes."""
        await self._parking.aclose()

    async def handle(self, msg: InboundMessage, parked: ParkTicket | None = None) -> Disposition:
        """``parked``: a message taken again at a start (``replay``)."""
        self._metrics.messages_in.labels(msg.platform).inc()
        with structlog.contextvars.bound_contextvars(platform=msg.platform, chat_id=_loggable(msg.chat_id)):
            try:
                return await self._handle(msg, parked)
            except _AWAY as exc:
                if msg.platform_retries and not msg.awaits_answer:
                    # Not taken, so not acknowledged: the redelivery gets the answer, not a notice now.
                    log.warning("router.deferred", message_id=_loggable(msg.message_id), error=type(exc).__name__,
                                reason=str(exc)[:300])
                    return Disposition.DEFERRED
                log.exception("router.handle_failed", message_id=msg.message_id)
                await self._notice(msg, "Sorry, that message could not be handled. Please try again.", exc)
                return Disposition.ANSWERED
            except Exception as exc:
                log.exception("router.handle_failed", message_id=msg.message_id)
                await self._notice(msg, "Sorry, that message could not be handled. Please try again.", exc)
                return Disposition.ANSWERED

    async def _handle(self, msg: InboundMessage, parked: ParkTicket | None) -> Disposition:
        decision = self._auth.check(msg)
        if not decision.allowed:
            await self._refused(msg, decision)
            return Disposition.REFUSED
        if not msg.addressed:
            return Disposition.IGNORED
        bad = _unencodable_field(msg)
        if bad is not None:
            # Nothing can store it (SQLite and every platform refuse lone surrogates): refused before
            # anything is written. Adapters clean message text; this catches ids and the rest.
            log.warning("router.bad_text", message_id=_loggable(msg.message_id), field=bad)
            await self._notice(msg, f"That message cannot be read: its {bad} is not valid Unicode text "
                                    "(it holds a lone UTF-16 surrogate).", BadInputError(bad))
            return Disposition.ANSWERED
        # Dedupe before anything answers: a redelivery, or the second event of one
        # post (Slack's message + app_mention), must not get a second notice either.
        delivery_key = msg.delivery_key
        if delivery_key is None:
            return await self._handle_new(msg, _Claim(parked))
        dedupe = self.services.dedupe
        while not await dedupe.claim(msg.platform, delivery_key):
            if not msg.awaits_answer and parked is None:
                log.info("router.duplicate", message_id=msg.message_id, delivery_key=delivery_key)
                return Disposition.DUPLICATE
            if dedupe.in_flight(msg.platform, delivery_key):
                await dedupe.settled(msg.platform, delivery_key)  # its first copy is being answered here
                continue
            replayed = await self._retried(msg, delivery_key, parked)
            if replayed is not None:
                return replayed
        claim = _Claim(parked)
        try:
            return await self._handle_new(msg, claim)
        except _AWAY:
            claim.outcome = "released"  # nothing stored: its redelivery (or retry) must be taken
            raise
        finally:
            if claim.outcome == "turn":
                pass  # recorded with the turn's question, released when the turn ends
            elif claim.outcome == "answered":
                await self._record_answered(msg, delivery_key)
            else:  # never processed: a redelivery must count
                dedupe.release(msg.platform, delivery_key)

    async def _record_answered(self, msg: InboundMessage, delivery_key: str) -> None:
        try:
            await self.services.dedupe.record(msg.platform, delivery_key, user_id=msg.user_id)
        except _AWAY as exc:
            # Answered already: deferring it now would answer it twice. A redelivery may be answered again.
            log.warning("router.answered_unrecorded", message_id=_loggable(msg.message_id), error=type(exc).__name__)

    async def _refused(self, msg: InboundMessage, decision: Decision) -> None:
        """A sender not let in: a DM may get a pairing code (``auth.unknown_dm``); groups get nothing."""
        pairing = self.services.pairing
        if (pairing is not None and msg.chat_type is ChatType.DM and msg.addressed
                and self._auth.unknown_dm(msg.platform) == "pair"):
            reply, why = await pairing.request(msg)
            decision = Decision(False, f"{decision.reason}; {why}")
            if reply is not None:
                # Sent as it is, never logged: the code is in it.
                await self._send(msg, reply, SendKind.NOTICE)
        self._auth.log_refusal(msg, decision)

    async def _retried(self, msg: InboundMessage, delivery_key: str, parked: ParkTicket | None) -> Disposition | None:
        """A retry of a request seen before, whose sender waits for an answer: the first one's
        answer, or its turn resumed when a crash (or a failure) cut it off. None: claim again.
        ``parked``: a message taken again at a start, whose question a cut-off turn had stored."""
        dedupe = self.services.dedupe
        seen = await dedupe.get(msg.platform, delivery_key)
        if seen is None:  # forgotten meanwhile (swept): it is new
            return None
        if parked is not None and (seen.question_id is None or not await self._parking.unanswered(parked)):
            return Disposition.DUPLICATE  # answered without a turn before the crash, or a copy of it answered
        if seen.answer is not None:
            log.info("router.retry_answered", message_id=msg.message_id, delivery_key=delivery_key)
            await self._send(msg, seen.answer, SendKind.NOTICE)
            return Disposition.ANSWERED
        if seen.question_id is None:
            await self._notice(msg, "A request with this Idempotency-Key was answered before, and that answer "
                                    "is not kept. Send it as a new request (with a new Idempotency-Key).",
                               DuplicateRequestError(delivery_key))
            return Disposition.ANSWERED
        if not dedupe.hold(msg.platform, delivery_key):  # another retry got there first: wait for it
            return None
        log.info("router.retry_resumed", message_id=msg.message_id, session_id=seen.session_id)
        key = build_session_key(msg, self._keys)
        claim = _Claim()
        try:
            async def resume() -> None:
                try:
                    await self._turns.run(msg, key, msg.text.strip(), resume=seen, parked=parked)
                finally:
                    dedupe.release(msg.platform, delivery_key)

            claim.parked = parked
            with structlog.contextvars.bound_contextvars(session_key=key):
                disposition = await self._enqueue(msg, key, resume, claim)
            if disposition is Disposition.ACCEPTED:
                claim.outcome = "turn"
            return disposition
        finally:
            if claim.outcome != "turn":
                dedupe.release(msg.platform, delivery_key)

    async def _handle_new(self, msg: InboundMessage, claim: _Claim) -> Disposition:
        if not self._accepting:
            claim.outcome = "released"  # never processed: a redelivery after the restart must count
            await self._notice(msg, "The gateway is restarting; please send that again in a minute.",
                               LanesClosedError("the gateway is restarting"))
            return Disposition.ANSWERED
        text = msg.text.strip()
        if not text and not msg.attachments:
            await self._refuse(msg, claim, BadInputError("nothing to read"), "That message had nothing I can read.")
            return Disposition.ANSWERED
        if len(text) > MAX_INPUT_CHARS:
            await self._refuse(msg, claim, InputTooLongError(f"{len(text)} characters"),
                               f"That message is too long ({len(text)} characters; the limit is {MAX_INPUT_CHARS}).")
            return Disposition.ANSWERED
        key = build_session_key(msg, self._keys)
        with structlog.contextvars.bound_contextvars(session_key=key):
            return await self._route(msg, key, text, claim)

    async def _route(self, msg: InboundMessage, key: str, text: str, claim: _Claim) -> Disposition:
        parsed = parse_command(text)
        if parsed is not None:
            command = self._commands.get(parsed.name)
            if command is None:
                skill = await self._skill_call(parsed.name, parsed.args)
                if skill is None:
                    await self._notice(msg, f"Unknown command /{parsed.name}. Send /help for the list.")
                    return Disposition.ANSWERED
                if skill.text is None:
                    await self._notice(msg, skill.reply or f"/{parsed.name} cannot run now.")
                    return Disposition.ANSWERED
                return await self._turn(msg, key, skill.text, claim)
            ctx = CommandContext(msg, key, parsed.args, self.services, self._commands, self._handoffs, self._turns)
            if command.immediate:
                await self._run_command(ctx, command.handler)
                return Disposition.ANSWERED
            if await self._refused_during_handoff(msg, key, claim):
                return Disposition.ANSWERED

            async def queued_command() -> None:  # recorded once it ran: a crash before that takes it again
                try:
                    await self._run_command(ctx, command.handler)
                except BaseException:  # stopped (/stop, the drain): a redelivery counts
                    if msg.delivery_key is not None:
                        self.services.dedupe.release(msg.platform, msg.delivery_key)
                    raise
                if msg.delivery_key is not None:
                    self._parking.later(self._record_answered(msg, msg.delivery_key))

            disposition = await self._enqueue(msg, key, queued_command, claim)
            if disposition is Disposition.ACCEPTED:
                claim.outcome = "turn"
            return disposition
        return await self._turn(msg, key, text, claim)

    async def _skill_call(self, name: str, args: str) -> SkillCall | None:
        """``/name args`` as an installed skill's call (``Services.skill_commands``), if it is one."""
        skills = self.services.skill_commands
        return None if skills is None else await skills.call(name, args)

    async def _turn(self, msg: InboundMessage, key: str, text: str, claim: _Claim) -> Disposition:
        if await self._refused_during_handoff(msg, key, claim):
            return Disposition.ANSWERED

        async def turn() -> None:
            try:
                await self._turns.run(msg, key, text, parked=claim.parked)
            finally:
                if msg.delivery_key is not None:
                    self.services.dedupe.release(msg.platform, msg.delivery_key)

        disposition = await self._enqueue(msg, key, turn, claim)
        if disposition is Disposition.ACCEPTED:
            claim.outcome = "turn"
        return disposition

    async def _refused_during_handoff(self, msg: InboundMessage, key: str, claim: _Claim) -> bool:
        """While this chat's session is being handed off, nothing else may run on it
        (a turn would interleave with the synthetic one; /new would end it)."""
        target = await self._handoffs.held(key)
        if target is None:
            return False
        log.info("router.refused_during_handoff", target=target)
        await self._refuse(msg, claim, ChatBusyError(f"handed off to {target}"),
                           f"⏳ This session is being handed off to {target} right now. "
                           "Wait for the outcome here, then send that again.")
        return True

    async def _enqueue(self, msg: InboundMessage, key: str, job: Job, claim: _Claim) -> Disposition:
        gate = self.services.lanes.gate
        if gate is not None and await gate.handed_off(msg, key):
            # several nodes: the chat's owner runs it, and records it as seen with its turn (its
            # duplicate check then also catches a copy that reached both nodes); nothing here
            claim.outcome = "released"
            return Disposition.ANSWERED
        if claim.parked is None and self._parking.wanted(msg):  # before the platform is told it was taken
            claim.parked = await self._parking.park(msg, key)
        ticket = claim.parked
        if ticket is not None:
            job = self._parking.job(ticket, job, msg.platform, key, stopping=lambda: not self._accepting)

        async def dropped() -> None:  # the gateway stopped before the job ran (a parked one is taken again)
            if msg.delivery_key is not None:
                self.services.dedupe.release(msg.platform, msg.delivery_key)

        try:
            ahead, ack = self.services.lanes.submit(key, job, on_drop=dropped, label=msg.text)
        except (LaneFullError, LanesClosedError) as exc:
            claim.outcome = "released"
            await self._parking.settle(ticket)  # answered by the notice
            text = (f"Too many messages are waiting in this chat ({exc}). Please wait a moment."
                    if isinstance(exc, LaneFullError) else "The gateway is restarting; please send that again in a minute.")
            await self._notice(msg, text, exc)
            return Disposition.ANSWERED
        if ticket is not None and ticket.replayed:
            ack = False  # said before the restart, if at all
        if ack and self.services.config.settings.gateway.busy_ack:
            await self._send(msg, QUEUED_ACK, SendKind.ACK)
        log.debug("router.enqueued", ahead=ahead)
        return Disposition.ACCEPTED

    # ------------------------------------------------------------------- work

    async def _run_command(self, ctx: CommandContext, handler: Callable[[CommandContext], Awaitable[str | None]]) -> None:
        try:
            reply = await handler(ctx)
        except asyncio.CancelledError:
            raise
        except GatewayError as exc:
            view = describe(exc)
            # A command's refusal (/handoff to nowhere, a taken /title) is its answer; only a failure
            # of the gateway or the model is one for an HTTP caller too.
            failed = view.http_status >= 500 or view.http_status == 429
            await self._notice(ctx.message, view.reply, exc if failed else None)
            return
        except Exception as exc:
            log.exception("router.command_failed")
            await self._notice(ctx.message, f"Sorry, that command failed ({type(exc).__name__}).", exc)
            return
        if reply:
            await self._notice(ctx.message, reply)

    # ------------------------------------------------------------------ output

    async def _refuse(self, msg: InboundMessage, claim: _Claim, exc: GatewayError, text: str) -> None:
        """Answer with an error notice. A request that waits for it may be sent again as it is
        (nothing was done), so its claim is released; a platform's redelivery gets no second notice."""
        if msg.awaits_answer:
            claim.outcome = "released"
        await self._notice(msg, text, exc)

    async def _notice(self, msg: InboundMessage, text: str, error: BaseException | None = None) -> None:
        await self._send(msg, text, SendKind.NOTICE, error)

    async def _send(self, msg: InboundMessage, text: str, kind: SendKind, error: BaseException | None = None) -> None:
        await self.services.delivery.send(OutboundMessage(
            msg.platform, msg.chat_id, redact(text), msg.thread_id, msg.message_id, kind,
            error=describe(error).reply_error() if error is not None else None,
        ))


def _unencodable_field(msg: InboundMessage) -> str | None:
    """The first field of ``msg`` that cannot be encoded as UTF-8 (it holds a lone surrogate)."""
    for name in ("text", "chat_id", "user_id", "thread_id", "message_id", "dedupe_id", "user_name", "chat_name"):
        value = getattr(msg, name)
        if isinstance(value, str) and not _encodable(value):
            return name
    return None


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _loggable(text: str | None) -> str | None:
    """An id as a log line can carry it (a lone surrogate shown escaped)."""
    return text if text is None or _encodable(text) else text.encode("utf-8", "backslashreplace").decode()
