"""One agent turn: session binding, a fresh agent, its answer delivered through the ledger.

The router puts a turn in its chat's lane; ``Turns.run`` is what runs there. ``Turns.run_in_lane``
queues one for someone else (/handoff's summary) and tells how it ended; ``answer_again`` is /retry's.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import structlog

from adapters.base import (
    ChatType,
    InboundMessage,
    OutboundMessage,
    ReplyError,
    SendKind,
    TokenUsage,
)
from core.agent import Agent, AnswerOp, TurnRequest
from core.tools.send_file import file_roots
from gateway.errors import (
    DuplicateRequestError,
    GatewayError,
    LaneLostError,
    LanesClosedError,
    ModelNotConfiguredError,
    describe,
)
from gateway.logs import redact
from gateway.media import TakenMedia, TurnFiles, attach_linked_images, note_files, speak_answer
from gateway.routing.approvals import TurnApprover
from gateway.routing.background import BackgroundTurns
from gateway.routing.models import revert_rejected, turn_model
from gateway.routing.outbox import ReplyOutbox, fenced
from gateway.routing.parking import ParkTicket
from gateway.routing.reasoning import show_reasoning
from gateway.routing.resets import MemoryFlush, Resets
from gateway.routing.services import Services
from gateway.routing.session_index import Binding
from gateway.routing.session_key import is_shared_session
from gateway.routing.streaming import ChatPacer
from gateway.routing.turn_media import take_media
from gateway.routing.turn_stream import end_stopped, open_stream
from storage import SeenMessage

log = structlog.get_logger("hermes.router")

#: what a caller waiting for the answer of a stopped turn gets (an HTTP request; chats see /stop's own reply)
STOPPED_REPLY = "⚡ Stopped before the answer was finished. Everything said so far is kept in the session."

AgentMaker = Callable[[Services, TurnRequest], Agent]


class Turns:
    def __init__(self, services: Services, make_agent: AgentMaker, *,
                 memory_flush: MemoryFlush | None = None) -> None:
        self.services = services
        self._make_agent = make_agent
        #: automatic resets and the agent's turn before each (the daemon's sweeper runs them too)
        self.resets = Resets(services, memory_flush)
        self._accepting = True
        self.background = BackgroundTurns(services, make_agent)  # /bg
        #: every streamed answer's edits in one chat share its pace
        self._pacer = ChatPacer(services.config.settings.streaming.edit_interval)

    def stop_intake(self) -> None:  # the gateway is stopping: a summary turn stopped from now on failed for it
        self._accepting = False

    async def run_in_lane(self, msg: InboundMessage, key: str, text: str, *,
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

    async def run(self, msg: InboundMessage, key: str, text: str, *, resume: SeenMessage | None = None,
                  parked: ParkTicket | None = None) -> None:
        """One turn of the agent for a message the router put in ``key``'s lane.

        ``resume``: the message is a retry of one whose question is stored and whose
        turn never ended (a crash cut it off, or its model failed): answer that question.
        ``parked``: its row (``gateway.routing.parking``), which goes with the stored answer.
        """
        try:
            await self._turn_outcome(msg, key, text, resume, parked=parked)
        except asyncio.CancelledError:
            if msg.awaits_answer and self._accepting:  # /stop: the waiting caller still gets its answer
                await asyncio.shield(self._say_stopped(msg))
            raise

    async def answer_again(self, msg: InboundMessage, key: str, session_id: str, question: str) -> bool:
        """/retry, in ``key``'s lane: ``question``, which ``session_id`` ends with, answered again; True: delivered."""
        return await self._turn_outcome(msg, key, question, again=session_id)

    async def _bind(self, msg: InboundMessage, key: str, resume: SeenMessage | None,
                    again: str | None = None) -> Binding | None:
        """The session this turn runs in; None when a resumed question can no longer be answered."""
        services = self.services
        if again is not None:  # None: the chat moved to another session meanwhile
            return Binding(key, again, created=False) if await services.index.current(key) == again else None
        if resume is not None:
            if resume.session_id is not None and await services.index.current(key) == resume.session_id \
                    and await services.dedupe.question_open(resume):
                return Binding(key, resume.session_id, created=False)
            log.info("router.retry_not_resumable", session_id=resume.session_id)
            await self._notice_error(msg, DuplicateRequestError(
                "This request was taken before, and its conversation has moved on since, so it cannot be "
                "answered again. Send it as a new request (with a new Idempotency-Key)." if msg.awaits_answer else
                "The gateway restarted while answering a message here, and this conversation has moved on "
                "since, so it is not answered now. Send it again if you still want the answer."))
            return None
        binding = await services.index.resolve(key, msg, model=services.model_name)
        if binding.reset_reason is not None and binding.previous_session_id is not None:
            # The sweeper had not come by yet: the ended session gets its turn in the
            # background, and this message does not wait for it.
            self.resets.flush_in_background(binding.previous_session_id)
        return binding

    async def _turn_outcome(self, msg: InboundMessage, key: str, text: str, resume: SeenMessage | None = None,
                            again: str | None = None, *, parked: ParkTicket | None = None) -> bool:
        services = self.services
        try:
            binding = await self._bind(msg, key, resume, again)
        except Exception as exc:  # state.db refused (a full disk, ...): the person waiting is told
            if isinstance(exc, GatewayError):
                log.warning("router.bind_failed", error_type=type(exc).__name__, error=str(exc))
            else:
                log.exception("router.bind_failed")
            await self._notice_error(msg, exc)
            return False
        if binding is None:
            return False
        with structlog.contextvars.bound_contextvars(session_id=binding.session_id):
            if binding.created:
                log.info("router.session_started", reset_reason=binding.reset_reason,
                         previous_session_id=binding.previous_session_id)
            note = binding.title_note
            typing = asyncio.create_task(self._keep_typing(msg), name=f"typing:{key}")
            taken: TakenMedia | None = None
            if msg.attachments and resume is None and again is None:
                taken = await take_media(services, msg)
                if taken is None or not taken.answerable:
                    typing.cancel()
                    if taken is not None and services.media is not None:
                        services.media.blobs.release(*taken.digests)
                    return False
                text = taken.text
            header, footer = taken.notes(shared=msg.chat_type is not ChatType.DM,
                                         echo=services.config.settings.stt.echo_transcript) if taken else ("", "")
            # What the agent's send_file hands over goes out with the answer.
            files = TurnFiles(services.media.blobs, limit=services.media.limit) if services.media else None

            def reply_to_user(answer: str, kind: SendKind = SendKind.REPLY, *, error: ReplyError | None = None,
                              usage: TokenUsage | None = None) -> OutboundMessage:
                # The title the user was told was saved could not be applied: say so with this reply.
                body = f"{answer}\n\n⚠️ {note}" if note else answer
                body = f"{header}{body}{footer}"
                sent = tuple(files.files) if files is not None and kind is SendKind.REPLY else ()
                return OutboundMessage(msg.platform, msg.chat_id, redact(body), msg.thread_id, msg.message_id, kind,
                                       error=error, usage=usage, files=sent)

            gate = services.lanes.gate
            fence = gate.fence(key) if gate is not None else None
            outbox = (ReplyOutbox(key, binding.session_id, reply_to_user)
                      if services.delivery.recoverable(msg.platform) else None)
            # Once the answer shows, it says more than "typing…" does.
            stream = open_stream(services, self._pacer, msg, outbox, on_shown=typing.cancel)
            request = TurnRequest(
                session_id=binding.session_id,
                session_key=key,
                platform=msg.platform,
                chat_type=str(msg.chat_type),
                text=text,
                user_id=msg.user_id,
                user_name=msg.user_name,
                shared_session=is_shared_session(msg, services.key_settings),
                # "seen" commits with the question: a message cut off before it was stored is taken again
                on_question=fenced(fence, services.dedupe.question_op(msg.platform, msg.delivery_key,
                                                                      user_id=msg.user_id)),
                on_answer=fenced(fence, self._answer_ops(msg, outbox, reply_to_user, parked)),
                question_stored=resume is not None or again is not None,
                listener=stream,
                parts=taken.parts if taken is not None else (),
                link=taken.link if taken is not None and taken.rows else None,
                recall_images=(services.media.recall  # a model that cannot see was never sent any
                               if services.media is not None and services.config.settings.model.vision else None),
                image_history_turns=services.config.settings.media.image_history_turns,
                files=files,
                approver=TurnApprover(services.approvals, services.adapters.get(msg.platform), msg, key,
                                      binding.session_id, services.config.settings.tools),
                cron=services.cron_ports.port(services, msg, key) if services.cron_ports is not None else None,
            )
            error: ReplyError | None = None
            usage: TokenUsage | None = None
            kind = SendKind.REPLY
            reasoning: str | None = None
            started = time.perf_counter()
            try:  # the model /model chose (a state.db read: a failure is told like the turn's own)
                request = replace(request, model=await turn_model(services.store, services.config.settings, msg,
                                                                  binding.session_id))
                result = await self._make_agent(services, request).run_turn(request)
                reply, reasoning = result.text, result.reasoning
                usage = TokenUsage(result.usage.input_tokens, result.usage.output_tokens)
                if result.rejected_model is not None:  # the answer is the fallback's: say so (setting reverted)
                    note = await revert_rejected(services.store, services.config.settings, msg, binding.session_id,
                                                 result.rejected_model, note)
                if files is not None:
                    await self._answer_files(reply, files, taken, outbox.id if outbox is not None else None)
            except asyncio.CancelledError:
                if files is not None:
                    files.release()
                if outbox is not None and outbox.id is not None:  # stopped after the answer was stored
                    await asyncio.shield(services.delivery.withdraw(outbox.id, "the turn was stopped"))
                if stream is not None:  # what was written stays visible, marked (the agent stored it)
                    await asyncio.shield(end_stopped(stream, reply_to_user))
                raise
            except LaneLostError:
                log.warning("router.lane_lost")  # nothing of the turn was stored; the new owner answers
                if stream is not None:
                    await stream.close()
                return False
            except Exception as exc:
                if isinstance(exc, ModelNotConfiguredError):
                    pass  # said once at start-up; each reply says it again
                elif isinstance(exc, GatewayError):
                    log.warning("router.turn_error", error_type=type(exc).__name__, error=str(exc))
                else:
                    log.exception("router.turn_crashed")
                view = describe(exc)
                reply, kind, error = view.reply, SendKind.NOTICE, view.reply_error()
            finally:
                typing.cancel()
                services.metrics.turn_seconds.observe(time.perf_counter() - started)
                if taken is not None and services.media is not None:  # its rows are written (or never will be)
                    services.media.blobs.release(*taken.digests)
            try:
                ledger_id = outbox.id if outbox is not None else None
                if ledger_id is not None and kind is not SendKind.REPLY:
                    # The answer was stored, then the turn failed: the error notice goes out instead.
                    await services.delivery.withdraw(ledger_id, "the turn failed after its answer was stored")
                    ledger_id = None
                out = reply_to_user(reply, kind, error=error, usage=usage)
                if kind is SendKind.REPLY and reasoning:  # /reasoning on: before the answer
                    await show_reasoning(services.store, services.adapters.get(msg.platform), msg,
                                         binding.session_id, reasoning)
                if stream is not None and stream.shown:
                    sent = await services.delivery.finish_stream(stream, out, ledger_id=ledger_id)
                else:
                    if stream is not None:
                        await stream.close()
                    sent = await services.delivery.send(out, session_key=key, session_id=binding.session_id,
                                                        ledger_id=ledger_id)
                return sent and kind is SendKind.REPLY
            finally:
                if files is not None:  # a ledger row names them now (or never will)
                    files.release()

    async def _answer_files(self, reply: str, files: TurnFiles, taken: TakenMedia | None,
                            ledger_id: int | None) -> None:
        """Files the answer brings beyond ``send_file``'s: images it links to on this machine, and
        for a voice message its spoken version."""
        services = self.services
        if await attach_linked_images(reply, files, file_roots(services.config.home)):
            await note_files(services.store, ledger_id, files)
        if taken is not None and taken.transcripts:
            await speak_answer(services.config.settings.tts, reply, files, store=services.store, ledger_id=ledger_id)

    def _answer_ops(self, msg: InboundMessage, outbox: ReplyOutbox | None, compose: Callable[[str], OutboundMessage],
                    parked: ParkTicket | None) -> AnswerOp | None:
        """What commits with the answer: its ledger row, the message's parked row, and for a
        request that waits for it, the reply as its retries will get it."""
        delivery_key = msg.delivery_key if msg.awaits_answer else None
        if delivery_key is None and parked is None:
            return outbox.record if outbox is not None else None
        keep = self.services.dedupe.answer_op
        unpark = parked.settle_op() if parked is not None else None

        def op(conn: sqlite3.Connection, session_id: str, answer: str) -> None:
            if outbox is not None:
                outbox.record(conn, session_id, answer)
            if unpark is not None:
                unpark(conn)
            if delivery_key is not None:
                keep(msg.platform, delivery_key, compose(answer).text)(conn)

        return op

    async def _say_stopped(self, msg: InboundMessage) -> None:
        try:
            if msg.delivery_key is not None:  # a retry gets the same word (when the question was stored)
                await self.services.dedupe.record_answer(msg.platform, msg.delivery_key, STOPPED_REPLY)
            await self.services.delivery.send(OutboundMessage(
                msg.platform, msg.chat_id, STOPPED_REPLY, msg.thread_id, msg.message_id, SendKind.NOTICE))
        except Exception:
            log.exception("router.stopped_notice_failed")

    async def _notice_error(self, msg: InboundMessage, exc: BaseException) -> None:
        view = describe(exc)
        await self.services.delivery.send(OutboundMessage(
            msg.platform, msg.chat_id, redact(view.reply), msg.thread_id, msg.message_id, SendKind.NOTICE,
            error=view.reply_error()))

    async def _keep_typing(self, msg: InboundMessage) -> None:
        adapter = self.services.adapters.get(msg.platform)
        if adapter is None or self.services.delivery.relaying(msg.platform):  # not connected here
            return
        g = self.services.config.settings.gateway
        await asyncio.sleep(g.typing_delay)
        while True:
            with contextlib.suppress(Exception):
                await adapter.send_typing(msg.chat_id, msg.thread_id)
            await asyncio.sleep(g.typing_interval)

