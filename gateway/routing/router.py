"""The path of one message: authorize -> dedupe -> session key -> command? -> lane.

Every inbound message from every adapter comes through ``Router.handle``. It
never raises into an adapter: bad input gets a log line and, where a person
is waiting, a clear reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Literal

import structlog

from adapters.base import Disposition, InboundMessage, OutboundMessage, SendKind
from core.agent import Agent, TurnRequest
from core.errors import ModelNotConfiguredError
from gateway.logs import redact
from gateway.routing.auth import Authorizer
from gateway.routing.commands import CommandContext, parse_command
from gateway.routing.delivery import record_reply
from gateway.routing.lanes import Job, LaneFullError, LanesClosedError
from gateway.routing.services import Services
from gateway.routing.session_key import SessionKeySettings, build_session_key, is_shared_session
from storage.errors import GatewayError

if TYPE_CHECKING:
    from gateway.routing.metrics import GatewayMetrics

log = structlog.get_logger("hermes.router")

AgentMaker = Callable[[Services, TurnRequest], Agent]
MemoryFlush = Callable[[Services, str], Awaitable[None]]

QUEUED_ACK = "⏳ Queued — I'll answer after the current reply."
MAX_INPUT_CHARS = 32_000


class _Claim:
    """What became of a claimed message: a turn (recorded with its question), answered
    here (recorded at once), or released unprocessed (a redelivery counts)."""

    def __init__(self) -> None:
        self.outcome: Literal["answered", "turn", "released"] = "answered"


class _Outbox:
    """A reply's ledger row, written by the agent in the transaction that stores its answer."""

    def __init__(self, session_key: str, compose: Callable[[str], OutboundMessage]) -> None:
        self._key = session_key
        self._compose = compose
        self.id: int | None = None

    def record(self, conn: sqlite3.Connection, session_id: str, answer: str) -> None:
        # On the writer thread; a batch that is replayed runs this again and the last id stands.
        self.id = record_reply(conn, self._compose(answer), self._key, session_id)


class Router:
    #: set by the runner; None in tests that build a bare router
    metrics: GatewayMetrics | None = None

    def __init__(
        self,
        services: Services,
        authorizer: Authorizer,
        key_settings: SessionKeySettings,
        make_agent: AgentMaker,
        *,
        memory_flush: MemoryFlush | None = None,
    ) -> None:
        self.services = services
        self._auth = authorizer
        self._keys = key_settings
        self._make_agent = make_agent
        self._memory_flush = memory_flush
        self._accepting = True

    def stop_intake(self) -> None:
        self._accepting = False

    # ------------------------------------------------------------------ intake

    async def handle(self, msg: InboundMessage) -> Disposition:
        if self.metrics is not None:
            self.metrics.messages_in.labels(msg.platform).inc()
        with structlog.contextvars.bound_contextvars(platform=msg.platform, chat_id=msg.chat_id):
            try:
                return await self._handle(msg)
            except Exception:
                log.exception("router.handle_failed", message_id=msg.message_id)
                await self._notice(msg, "Sorry, that message could not be handled. Please try again.")
                return Disposition.ANSWERED

    async def _handle(self, msg: InboundMessage) -> Disposition:
        decision = self._auth.check(msg)
        if not decision.allowed:
            self._auth.log_refusal(msg, decision)
            return Disposition.REFUSED
        if not msg.addressed:
            return Disposition.IGNORED
        # Dedupe before anything answers: a redelivery, or the second event of one
        # post (Slack's message + app_mention), must not get a second notice either.
        delivery_key = msg.delivery_key
        if delivery_key is None:
            return await self._handle_new(msg, _Claim())
        dedupe = self.services.dedupe
        if not await dedupe.claim(msg.platform, delivery_key):
            log.info("router.duplicate", message_id=msg.message_id, delivery_key=delivery_key)
            return Disposition.DUPLICATE
        claim = _Claim()
        try:
            return await self._handle_new(msg, claim)
        finally:
            if claim.outcome == "turn":
                pass  # recorded with the turn's question, released when the turn ends
            elif claim.outcome == "answered":
                await dedupe.record(msg.platform, delivery_key)
            else:  # never processed: a redelivery must count
                dedupe.release(msg.platform, delivery_key)

    async def _handle_new(self, msg: InboundMessage, claim: _Claim) -> Disposition:
        if not self._accepting:
            claim.outcome = "released"
            await self._notice(msg, "The gateway is restarting; please send that again in a minute.")
            return Disposition.ANSWERED
        text = msg.text.strip()
        if not text:
            await self._notice(msg, "I can only read text messages for now.")
            return Disposition.ANSWERED
        if len(text) > MAX_INPUT_CHARS:
            await self._notice(
                msg, f"That message is too long ({len(text)} characters; the limit is {MAX_INPUT_CHARS})."
            )
            return Disposition.ANSWERED
        key = build_session_key(msg, self._keys)
        with structlog.contextvars.bound_contextvars(session_key=key):
            return await self._route(msg, key, text, claim)

    async def _route(self, msg: InboundMessage, key: str, text: str, claim: _Claim) -> Disposition:
        parsed = parse_command(text)
        if parsed is not None:
            command = self.services.commands.get(parsed.name)
            if command is None:
                await self._notice(msg, f"Unknown command /{parsed.name}. Send /help for the list.")
                return Disposition.ANSWERED
            ctx = CommandContext(msg, key, parsed.args, self.services)
            if command.immediate:
                await self._run_command(ctx, command.handler)
                return Disposition.ANSWERED
            if await self._refused_during_handoff(msg, key):
                return Disposition.ANSWERED
            return await self._enqueue(msg, key, lambda: self._run_command(ctx, command.handler), claim)
        if await self._refused_during_handoff(msg, key):
            return Disposition.ANSWERED

        async def turn() -> None:
            try:
                await self._turn(msg, key, text)
            finally:
                if msg.delivery_key is not None:
                    self.services.dedupe.release(msg.platform, msg.delivery_key)

        disposition = await self._enqueue(msg, key, turn, claim)
        if disposition is Disposition.ACCEPTED:
            claim.outcome = "turn"
        return disposition

    async def _refused_during_handoff(self, msg: InboundMessage, key: str) -> bool:
        """While this chat's session is being handed off, nothing else may run on it
        (a turn would interleave with the synthetic one; /new would end it)."""
        handoffs = self.services.handoffs
        target = handoffs.in_flight(key) if handoffs is not None else None
        if target is None:
            return False
        log.info("router.refused_during_handoff", target=target)
        await self._notice(msg, f"⏳ This session is being handed off to {target} right now. "
                                "Wait for the outcome here, then send that again.")
        return True

    async def _enqueue(self, msg: InboundMessage, key: str, job: Job, claim: _Claim) -> Disposition:
        async def dropped() -> None:  # the gateway stopped before the job ran
            if msg.delivery_key is not None:
                self.services.dedupe.release(msg.platform, msg.delivery_key)

        try:
            ahead, ack = self.services.lanes.submit(key, job, on_drop=dropped, label=msg.text)
        except LaneFullError as exc:
            claim.outcome = "released"
            await self._notice(msg, f"Too many messages are waiting in this chat ({exc}). Please wait a moment.")
            return Disposition.ANSWERED
        except LanesClosedError:
            claim.outcome = "released"
            await self._notice(msg, "The gateway is restarting; please send that again in a minute.")
            return Disposition.ANSWERED
        if ack and self.services.config.settings.gateway.busy_ack:
            await self._send(msg, QUEUED_ACK, SendKind.ACK)
        log.debug("router.enqueued", ahead=ahead)
        return Disposition.ACCEPTED

    # ------------------------------------------------------------------- work

    async def _run_command(self, ctx: CommandContext, handler: Callable[[CommandContext], Awaitable[str | None]]) -> None:
        try:
            reply = await handler(ctx)
        except GatewayError as exc:
            reply = f"⚠️ {exc}"
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("router.command_failed")
            reply = f"Sorry, that command failed ({type(exc).__name__})."
        if reply:
            await self._notice(ctx.message, reply)

    async def run_turn_in_lane(self, msg: InboundMessage, key: str, text: str, *,
                               prepare: Callable[[], Awaitable[None]] | None = None) -> bool:
        """One agent turn for ``key`` behind whatever already waits in its lane (the
        synthetic turn of /handoff); True when the agent answered and the reply was
        delivered. ``prepare`` runs in the lane right before the turn (the handoff binds
        the key there, so what waited ahead of it still ran on the old session).
        Raises LaneFullError / LanesClosedError when it cannot be queued.

        Cancelling the caller withdraws the turn: a job still waiting in the lane
        will not run, and a running one is stopped. Only this job: whatever else
        runs or waits for ``key`` (the home chat's own conversation) is untouched.
        """
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        running: list[asyncio.Task[None]] = []

        async def job() -> None:
            if done.done():  # withdrawn while it waited
                log.info("router.withdrawn_turn_skipped")
                return
            task = asyncio.current_task()
            if task is not None:
                running.append(task)
            try:
                if prepare is not None:
                    await prepare()
                ok = await self._turn_outcome(msg, key, text)
            except BaseException as exc:
                if not done.done():  # a stopped turn is a failed handoff, not a cancelled caller
                    done.set_exception(exc if isinstance(exc, Exception) else RuntimeError(
                        "the summary turn was stopped" if self._accepting else "the gateway stopped during the handoff"
                    ))
                raise
            if not done.done():
                done.set_result(ok)

        async def dropped() -> None:
            if not done.done():
                done.set_exception(LanesClosedError("the gateway stopped before the turn ran"))

        self.services.lanes.submit(key, job, on_drop=dropped, label=text)
        try:
            return await asyncio.shield(done)
        except asyncio.CancelledError:
            if not done.done():
                done.cancel()  # the job sees it and skips, if it has not started
            for task in running:
                task.cancel()
            raise

    async def _turn(self, msg: InboundMessage, key: str, text: str) -> None:
        await self._turn_outcome(msg, key, text)

    async def _turn_outcome(self, msg: InboundMessage, key: str, text: str) -> bool:
        services = self.services
        due = await services.index.due_reset(key)
        if due is not None and self._memory_flush is not None:
            try:
                await self._memory_flush(services, due)
            except Exception:  # saving memories must never cost the user their answer
                log.exception("router.memory_flush_failed", session_id=due)
        binding = await services.index.resolve(key, msg, model=services.model_name)
        with structlog.contextvars.bound_contextvars(session_id=binding.session_id):
            if binding.created:
                log.info("router.session_started", reset_reason=binding.reset_reason,
                         previous_session_id=binding.previous_session_id)
            note = binding.title_note

            def reply_to_user(answer: str, kind: SendKind = SendKind.REPLY) -> OutboundMessage:
                # The title the user was told was saved could not be applied: say so with this reply.
                body = f"{answer}\n\n⚠️ {note}" if note else answer
                return OutboundMessage(msg.platform, msg.chat_id, redact(body), msg.thread_id, msg.message_id, kind)

            outbox = _Outbox(key, reply_to_user) if services.delivery.recoverable(msg.platform) else None
            request = TurnRequest(
                session_id=binding.session_id,
                session_key=key,
                platform=msg.platform,
                chat_type=str(msg.chat_type),
                text=text,
                user_id=msg.user_id,
                user_name=msg.user_name,
                shared_session=is_shared_session(msg, self._keys),
                # "seen" commits with the question: a message cut off before it was stored is taken again
                on_question=(services.dedupe.record_op(msg.platform, msg.delivery_key)
                             if msg.delivery_key is not None else None),
                on_answer=outbox.record if outbox is not None else None,
            )
            typing = asyncio.create_task(self._keep_typing(msg), name=f"typing:{key}")
            kind = SendKind.REPLY
            started = time.perf_counter()
            try:
                result = await self._make_agent(services, request).run_turn(request)
                reply = result.text
            except ModelNotConfiguredError as exc:
                reply, kind = str(exc), SendKind.NOTICE
            except GatewayError as exc:
                log.warning("router.turn_error", error_type=type(exc).__name__, error=str(exc))
                reply, kind = f"⚠️ {exc}", SendKind.NOTICE
            except asyncio.CancelledError:
                if outbox is not None and outbox.id is not None:  # stopped after the answer was stored
                    await asyncio.shield(services.delivery.withdraw(outbox.id, "the turn was stopped"))
                raise
            except Exception as exc:
                log.exception("router.turn_crashed")
                reply, kind = (
                    f"Sorry, something went wrong ({type(exc).__name__}). "
                    "Try again, or send /reset to start a fresh session.",
                    SendKind.NOTICE,
                )
            finally:
                typing.cancel()
                if self.metrics is not None:
                    self.metrics.turn_seconds.observe(time.perf_counter() - started)
            ledger_id = outbox.id if outbox is not None else None
            if ledger_id is not None and kind is not SendKind.REPLY:
                # The answer was stored, then the turn failed: the error notice goes out instead.
                await services.delivery.withdraw(ledger_id, "the turn failed after its answer was stored")
                ledger_id = None
            sent = await services.delivery.send(
                reply_to_user(reply, kind), session_key=key, session_id=binding.session_id, ledger_id=ledger_id
            )
            return sent and kind is SendKind.REPLY

    async def _keep_typing(self, msg: InboundMessage) -> None:
        adapter = self.services.adapters.get(msg.platform)
        if adapter is None:
            return
        g = self.services.config.settings.gateway
        await asyncio.sleep(g.typing_delay)
        while True:
            with contextlib.suppress(Exception):
                await adapter.send_typing(msg.chat_id, msg.thread_id)
            await asyncio.sleep(g.typing_interval)

    # ------------------------------------------------------------------ output

    async def _notice(self, msg: InboundMessage, text: str) -> None:
        await self._send(msg, text, SendKind.NOTICE)

    async def _send(self, msg: InboundMessage, text: str, kind: SendKind) -> None:
        await self.services.delivery.send(
            OutboundMessage(msg.platform, msg.chat_id, redact(text), msg.thread_id, msg.message_id, kind)
        )
