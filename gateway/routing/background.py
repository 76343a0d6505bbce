"""Background turns (/bg): a fresh agent turn in a session of its own, its answer delivered to
the chat that asked, once.

Like a scheduled run (``gateway.scheduler.run``): the task's row is written before it is
queued, and its answer, the answer's delivery-ledger row and the task's 'done' are one
transaction. A crash before that leaves the row 'running': the next start marks it
interrupted and tells the chat so, through the ledger too (told once). A crash after it
leaves a ledger row the restart's recovery sends. Each task runs in a lane of its own key
(``<chat key>:bg:<id>``), so the chat's own lane stays free and the turn counts against
``gateway.max_concurrent_turns`` like any other.
"""

from __future__ import annotations

import asyncio
import secrets
import sqlite3
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog

from adapters.base import InboundMessage, OutboundMessage, SendKind
from core.agent import TurnRequest
from gateway.errors import describe
from gateway.logs import redact
from gateway.routing.delivery import record_reply
from gateway.routing.models import turn_model
from gateway.routing.services import Services
from storage import background, cron, new_session_id, ops, outbound

if TYPE_CHECKING:
    from gateway.routing.turns import AgentMaker

__all__ = ["BackgroundTurns", "RunningTask"]

log = structlog.get_logger("hermes.background")

_ID_BYTES = 3


@dataclass
class RunningTask:
    id: str
    chat_key: str
    prompt: str
    started_at: float = field(default_factory=time.time)
    stopping: bool = False
    #: its answer was stored as this task's ('done' won over a /stop): this run delivers it
    answered: bool = False


def task_key(chat_key: str, task_id: str) -> str:
    """The background session's own key (and lane)."""
    return f"{chat_key}:bg:{task_id}"


def answer_text(task_id: str, answer: str) -> str:
    return f"🔙 Background task {task_id} is done:\n\n{answer}"


def interrupted_text(task: background.BackgroundTask) -> str:
    prompt = " ".join(task.prompt.split())
    shown = prompt if len(prompt) <= 80 else prompt[:79] + "…"
    return (f"⚠️ Background task {task.id} was cut off by a restart before it finished ({shown}). "
            "Send /bg again to run it anew.")


class BackgroundTurns:
    def __init__(self, services: Services, make_agent: AgentMaker) -> None:
        self._services = services
        self._make_agent = make_agent
        self._running: dict[str, RunningTask] = {}
        self._notices: set[asyncio.Task[bool]] = set()

    @property
    def limit(self) -> int:
        return self._services.config.settings.gateway.max_background

    def running_in(self, chat_key: str) -> list[RunningTask]:
        return sorted((t for t in self._running.values() if t.chat_key == chat_key), key=lambda t: t.started_at)

    async def start(self, msg: InboundMessage, chat_key: str, prompt: str) -> RunningTask | None:
        """Queue a background turn for ``prompt``; None when this chat has ``limit`` running already.
        Raises LanesClosedError when the gateway is stopping."""
        if len(self.running_in(chat_key)) >= self.limit:
            return None
        task = RunningTask(secrets.token_hex(_ID_BYTES), chat_key, prompt)
        row = background.BackgroundTask(task.id, chat_key, msg.platform, msg.chat_id, msg.thread_id, msg.user_id,
                             msg.message_id, prompt, None, "running", None, None, task.started_at, None)
        await self._services.store.write(lambda c: background.insert(c, row))
        self._running[task.id] = task

        async def job() -> None:
            try:
                if not task.stopping:  # stopped while it waited for a slot: never started
                    await self._run(msg, task)
            finally:
                self._running.pop(task.id, None)

        async def dropped() -> None:  # the gateway stopped before it ran: told at the next start
            self._running.pop(task.id, None)

        try:
            self._services.lanes.submit(task_key(chat_key, task.id), job, on_drop=dropped, label=prompt)
        except Exception:
            self._running.pop(task.id, None)
            await self._services.store.write(
                lambda c: background.finish(c, task.id, "failed", now=time.time(), error="could not be queued"))
            raise
        return task

    async def stop(self, chat_key: str, task_id: str) -> str | None:
        """Stop this chat's running task ``task_id``; its state in words, None: no such task here."""
        task = self._running.get(task_id)
        if task is None or task.chat_key != chat_key:
            return None
        settled = await self._services.store.write(
            lambda c: background.finish(c, task_id, "stopped", now=time.time(), error="stopped with /stop"))
        if not settled:  # its answer was stored first: it is on its way, not stopped halfway
            return "finished already"
        task.stopping = True
        await self._services.lanes.cancel_running(task_key(chat_key, task_id))
        self._running.pop(task_id, None)
        return "stopped"

    async def _run(self, msg: InboundMessage, task: RunningTask) -> None:
        s = self._services
        session_id = new_session_id()
        key = task_key(task.chat_key, task.id)
        # The model the asking chat's next message would use (its /model, its channel's, the global one).
        chat_session = await s.index.current(task.chat_key)
        choice = await turn_model(s.store, s.config.settings, msg, chat_session or session_id)

        def open_session(conn: sqlite3.Connection) -> None:
            ops.create_session(conn, session_id, msg.platform, model=choice.name if choice else s.model_name,
                               user_id=msg.user_id)
            ops.set_session_title(conn, session_id, f"bg {task.id}")
            background.set_session(conn, task.id, session_id)
            # The asking chat may see and /resume it, without its own conversation moving there.
            cron.remember_owner(conn, task.chat_key, session_id, platform=msg.platform, user_id=msg.user_id,
                                now=time.time())

        recoverable = s.delivery.recoverable(msg.platform)
        ledger: list[int] = []

        def compose(text: str, kind: SendKind = SendKind.REPLY) -> OutboundMessage:
            return OutboundMessage(msg.platform, msg.chat_id, redact(text), msg.thread_id, msg.message_id, kind)

        def on_answer(conn: sqlite3.Connection, sid: str, answer: str) -> None:
            ledger_id = record_reply(conn, compose(answer_text(task.id, answer)), task.chat_key, sid) \
                if recoverable else None
            # On the writer thread; a replayed batch runs it again and the last outcome stands.
            task.answered = background.finish(conn, task.id, "done", now=time.time(), ledger_id=ledger_id)
            if task.answered:
                ledger[:] = [ledger_id] if ledger_id is not None else []
            elif ledger_id is not None:  # stopped meanwhile: the answer is kept, not sent
                outbound.mark(conn, ledger_id, "expired", "the task was stopped", now=time.time())

        request = TurnRequest(session_id=session_id, session_key=key, platform=msg.platform,
                              chat_type=str(msg.chat_type), text=task.prompt, user_id=msg.user_id,
                              user_name=msg.user_name, on_answer=on_answer, model=choice)
        with structlog.contextvars.bound_contextvars(session_key=key, session_id=session_id, task_id=task.id):
            try:
                await s.store.write(open_session)
                result = await self._make_agent(s, request).run_turn(request)
            except asyncio.CancelledError:
                log.info("background.cancelled", stopped=task.stopping)  # not stopped: told at the next start
                raise
            except Exception as exc:
                log.warning("background.failed", error_type=type(exc).__name__)
                why = describe(exc).reply.removeprefix("⚠️ ")
                if await s.store.write(lambda c: background.finish(c, task.id, "failed", now=time.time(),
                                                                   error=why[:500])):
                    await s.delivery.send_when_ready(
                        compose(f"⚠️ Background task {task.id} failed: {why}", SendKind.NOTICE))
                return
            if not task.answered:
                return  # stopped as it answered: /stop said so
            log.info("background.done")
            await s.delivery.send_when_ready(compose(answer_text(task.id, result.text)), session_key=task.chat_key,
                                             session_id=session_id, ledger_id=ledger[0] if ledger else None)

    # ------------------------------------------------------------ restarts

    async def recover(self) -> int:
        """At start-up: the tasks a crash (or a stop) cut off are marked interrupted, and their
        chats are told, each notice recorded in the ledger in the same transaction (sent once)."""
        s = self._services
        now = time.time()

        def interrupt(conn: sqlite3.Connection) -> list[tuple[OutboundMessage, int | None]]:
            told = []
            for task in background.interrupt_running(conn, now=now):
                out = OutboundMessage(task.platform, task.chat_id, interrupted_text(task), task.thread_id,
                                      task.reply_to, SendKind.REPLY)
                ledger_id = record_reply(conn, out, task.chat_session_key, task.session_id) \
                    if s.delivery.recoverable(task.platform) else None
                told.append((out, ledger_id))
            return told

        told = await s.store.write(interrupt)
        for out, ledger_id in told:
            log.info("background.interrupted", platform=out.platform)
            notice = asyncio.create_task(s.delivery.send_when_ready(out, ledger_id=ledger_id))
            self._notices.add(notice)
            notice.add_done_callback(self._notices.discard)
        return len(told)

    async def aclose(self) -> None:
        """Stop telling (a notice not sent yet stays pending in the ledger: the next start sends it)."""
        for notice in list(self._notices):
            notice.cancel()
        if self._notices:
            await asyncio.wait(set(self._notices), timeout=5)
