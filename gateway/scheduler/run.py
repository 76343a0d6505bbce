"""One run of a job: a fresh agent turn in a session of its own, its answer delivered once.

The answer, its delivery-ledger row and the run's "ok" are one transaction (the agent's
``on_answer``), exactly as a message's reply (``gateway.routing.turns``): a crash before it
leaves the run 'running' (interrupted, retried once at start-up), a crash after it leaves a
ledger row that the restart's recovery sends, and nothing is ever sent twice.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog

from adapters.base import OutboundMessage, SendKind
from core.agent import TurnRequest
from gateway.errors import JobError, describe
from gateway.logs import redact
from gateway.routing.delivery import record_reply
from gateway.routing.services import Services
from gateway.routing.turns import AgentMaker
from storage import CronJobRow, cron, new_session_id, ops, queries

__all__ = ["RunOutcome", "RunStarter", "Target"]

log = structlog.get_logger("hermes.cron")

#: how long a run's delivery waits for its platform to connect (a run right after start-up)
READY_WAIT = 60.0


@dataclass(frozen=True)
class Target:
    """Where a run's answer goes."""

    platform: str
    chat_id: str
    thread_id: str | None
    #: the chat's session key when it is the job's own chat (its ledger rows name it)
    session_key: str | None = None


@dataclass(frozen=True)
class RunOutcome:
    status: str  # ok | failed
    failures: int
    paused: bool


def session_title(name: str) -> str:
    return f"cron: {name}"


class RunStarter:
    """Runs jobs as agent turns; the scheduler decides when."""

    def __init__(self, services: Services, make_agent: AgentMaker, *, max_failures: int,
                 settled: Callable[[CronJobRow | None, str], None]) -> None:
        """``settled(row, job_id)``: a run's end was stored (``Jobs.refresh``); called before its
        message goes out, so that what /cron list says agrees with what the chat was just told."""
        self._services = services
        self._make_agent = make_agent
        self._max_failures = max_failures
        self._settled = settled

    async def target(self, row: CronJobRow) -> Target | None:
        """The destination now (a home channel is read at each run); None: deliver nowhere."""
        deliver = row.deliver
        if deliver == "none":
            return None
        if deliver == "origin":
            return Target(row.owner_platform, row.owner_chat_id, row.owner_thread_id, row.owner_session_key)
        platform, _, rest = deliver.partition(":")
        if platform == "home":
            home = await self._services.home_channels.get(rest)
            if home is None:
                raise JobError(f"{rest} has no home channel any more (send /sethome there).")
            return Target(home.platform, home.chat_id, home.thread_id)
        chat_id, _, thread = rest.partition(":")
        return Target(platform, chat_id, thread or None)

    async def run(self, row: CronJobRow, run_id: int, *, missed: int = 0) -> RunOutcome:
        with structlog.contextvars.bound_contextvars(job_id=row.id, run_id=run_id, session_key=f"cron:{row.id}"):
            try:
                return await self._run(row, run_id, missed)
            except asyncio.CancelledError:
                log.info("cron.run_cancelled")  # left 'running': the next start retries it once
                raise

    async def _run(self, row: CronJobRow, run_id: int, missed: int) -> RunOutcome:
        s = self._services
        session_key = f"cron:{row.id}"
        try:
            target = await self.target(row)
        except JobError as exc:
            return await self._failed(row, run_id, None, str(exc))
        session_id = new_session_id()
        now = time.time()
        title = session_title(row.name)

        def open_session(conn: sqlite3.Connection) -> None:
            ops.create_session(conn, session_id, "cron", model=s.model_name, user_id=row.owner_user_id,
                               started_at=now)
            # The first run is "cron: <name>", the next "cron: <name> #2": /resume of the title opens the last.
            taken = queries.title_in_use(conn, title)
            ops.set_session_title(conn, session_id, ops.next_title_in_lineage(conn, title) if taken else title)
            cron.set_session(conn, run_id, session_id)
            cron.remember_owner(conn, row.owner_session_key, session_id, platform=row.owner_platform,
                                user_id=row.owner_user_id, now=now)

        await s.store.write(open_session)
        recoverable = target is not None and s.delivery.recoverable(target.platform)
        ledger: list[int] = []

        def compose(answer: str, kind: SendKind = SendKind.REPLY) -> OutboundMessage:
            assert target is not None
            note = ""
            if missed == 1:
                note = "\n\n(It fell due while the gateway was down.)"
            elif missed > 1:
                note = f"\n\n(It fell due {missed} times while the gateway was down; this one run stands for them.)"
            return OutboundMessage(target.platform, target.chat_id, redact(f"⏰ {row.name}\n\n{answer}{note}"),
                                   target.thread_id, None, kind)

        def on_answer(conn: sqlite3.Connection, sid: str, answer: str) -> None:
            ledger_id = None
            if recoverable and target is not None:
                ledger_id = record_reply(conn, compose(answer), target.session_key, sid)
                ledger[:] = [ledger_id]
            cron.finish(conn, run_id, status="ok", now=time.time(), ledger_id=ledger_id)

        request = TurnRequest(
            session_id=session_id, session_key=session_key, platform=row.owner_platform,
            chat_type=row.owner_chat_type, text=row.prompt, user_id=row.owner_user_id, on_answer=on_answer,
            toolsets=frozenset(row.toolsets) if row.toolsets is not None else None,
        )
        started = time.perf_counter()
        try:
            result = await self._make_agent(s, request).run_turn(request)
        except Exception as exc:
            log.warning("cron.run_failed", session_id=session_id, error_type=type(exc).__name__)
            return await self._failed(row, run_id, target, describe(exc).reply.removeprefix("⚠️ "))
        finally:
            s.metrics.turn_seconds.observe(time.perf_counter() - started)
        log.info("cron.run_ok", session_id=session_id, deliver=row.deliver)
        job_id = row.id
        self._settled(await s.store.read(lambda c: cron.get(c, job_id)), job_id)
        if target is not None:
            await self._send(compose(result.text), target, session_id, ledger[0] if ledger else None)
        return RunOutcome("ok", 0, False)

    async def _failed(self, row: CronJobRow, run_id: int, target: Target | None, why: str) -> RunOutcome:
        limit = self._max_failures
        def op(conn: sqlite3.Connection) -> tuple[int, bool, CronJobRow | None]:
            failures, paused = cron.finish(conn, run_id, status="failed", now=time.time(), error=why[:500],
                                           pause_after=limit)
            return failures, paused, cron.get(conn, row.id)

        failures, paused, fresh = await self._services.store.write(op)
        self._settled(fresh, row.id)
        line = f"⚠️ Scheduled job {row.name!r} failed: {why}"
        if paused:
            line += (f"\nIt failed {failures} times in a row and is paused now; "
                     f"/cron resume {row.name} starts it again.")
            log.warning("cron.paused_after_failures", failures=failures)
        if target is None and paused:  # nowhere to say it: the job's own chat hears of the pause
            if row.owner_platform not in ("api-server", "cli"):
                target = Target(row.owner_platform, row.owner_chat_id, row.owner_thread_id)
        if target is not None:
            out = OutboundMessage(target.platform, target.chat_id, redact(line), target.thread_id, None,
                                  SendKind.NOTICE)
            await self._send(out, target, None, None)
        return RunOutcome("failed", failures, paused)

    async def _send(self, out: OutboundMessage, target: Target, session_id: str | None,
                    ledger_id: int | None) -> None:
        await self._services.delivery.send_when_ready(out, session_key=target.session_key, session_id=session_id,
                                                      ledger_id=ledger_id, ready_wait=READY_WAIT)
