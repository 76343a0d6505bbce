"""The path of one message: authorize -> dedupe -> session key -> command? -> lane.

Every inbound message from every adapter comes through ``Router.handle``. It
never raises into an adapter: bad input gets a log line and, where a person
is waiting, a clear reply.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

import structlog

from adapters.base import Disposition, InboundMessage, OutboundMessage, SendKind
from gateway.errors import GatewayError, LaneFullError, LanesClosedError, describe
from gateway.logs import redact
from gateway.routing.auth import Authorizer
from gateway.routing.commands import CommandContext, CommandRegistry, parse_command
from gateway.routing.lanes import Job
from gateway.routing.services import Handoffs, Services
from gateway.routing.session_key import build_session_key
from gateway.routing.turns import Turns

log = structlog.get_logger("hermes.router")

QUEUED_ACK = "⏳ Queued — I'll answer after the current reply."
MAX_INPUT_CHARS = 32_000


class _Claim:
    """What became of a claimed message: a turn (recorded with its question), answered
    here (recorded at once), or released unprocessed (a redelivery counts)."""

    def __init__(self) -> None:
        self.outcome: Literal["answered", "turn", "released"] = "answered"


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

    def stop_intake(self) -> None:
        self._accepting = False
        self._turns.stop_intake()

    # ------------------------------------------------------------------ intake

    async def handle(self, msg: InboundMessage) -> Disposition:
        self._metrics.messages_in.labels(msg.platform).inc()
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
            command = self._commands.get(parsed.name)
            if command is None:
                await self._notice(msg, f"Unknown command /{parsed.name}. Send /help for the list.")
                return Disposition.ANSWERED
            ctx = CommandContext(msg, key, parsed.args, self.services, self._commands, self._handoffs)
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
                await self._turns.run(msg, key, text)
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
        target = self._handoffs.in_flight(key)
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
        except asyncio.CancelledError:
            raise
        except GatewayError as exc:
            reply = describe(exc).reply
        except Exception as exc:
            log.exception("router.command_failed")
            reply = f"Sorry, that command failed ({type(exc).__name__})."
        if reply:
            await self._notice(ctx.message, reply)

    # ------------------------------------------------------------------ output

    async def _notice(self, msg: InboundMessage, text: str) -> None:
        await self._send(msg, text, SendKind.NOTICE)

    async def _send(self, msg: InboundMessage, text: str, kind: SendKind) -> None:
        await self.services.delivery.send(
            OutboundMessage(msg.platform, msg.chat_id, redact(text), msg.thread_id, msg.message_id, kind)
        )
