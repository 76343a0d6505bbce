"""/handoff: move a live session to another platform's home channel.

Inside the daemon, no polling: the command inserts a ``pending`` row and
starts a task that claims it (compare-and-set), opens a thread in the home
channel, binds that thread's session key (built by ``build_session_key``, like
any message from it) to the same session id, and runs a synthetic user turn
in the thread's lane so the agent confirms and summarises there. The source
chat then gets a reply starting with ``HANDOFF_DONE_PREFIX`` (the terminal
client exits on it) and the ``/resume <title>`` way back.

Failures (thread creation, sending, rate limits, a timeout) mark the row
``failed`` with the reason; the partial unique index then lets the user
retry. The transcript is never touched by a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog

from adapters.base import ChatType, InboundMessage, OutboundMessage, SendKind
from storage.errors import GatewayError, InvalidTitleError, TitleConflictError

from . import _handoff_store as rows
from .home_channels import HomeChannel
from .services import Services
from .session_key import SessionKeySettings, build_session_key

__all__ = ["HANDOFF_DONE_PREFIX", "HandoffRefusedError", "HandoffRunner", "TurnRunner"]

log = structlog.get_logger("hermes.handoff")

HANDOFF_DONE_PREFIX = "Handoff complete"
#: a pending row nobody claimed within this long is failed (the claim is
#: normally immediate; this only guards against a stalled daemon)
PENDING_TIMEOUT = 60.0
#: platforms that only answer requests and cannot host a conversation
_REQUEST_ONLY = frozenset({"api-server", "cli"})

#: runs one agent turn in a key's lane; True when the reply was delivered
TurnRunner = Callable[[InboundMessage, str, str], Awaitable[bool]]


class HandoffRefusedError(GatewayError):
    """/handoff cannot start; the message says why and what to do."""


@dataclass(frozen=True)
class _Job:
    handoff_id: int
    session_id: str
    source: InboundMessage
    source_key: str
    target: str
    home: HomeChannel


def synthetic_prompt(source_platform: str, title: str) -> str:
    return (
        f'[This session ("{title}") was just handed off from {source_platform} to this channel. '
        "The earlier conversation is above. Briefly confirm that you are continuing here and "
        "summarise what we were working on, so the user can carry on from this device.]"
    )


class HandoffRunner:
    def __init__(self, services: Services, run_turn: TurnRunner, *, timeout: float,
                 pending_timeout: float = PENDING_TIMEOUT) -> None:
        self._services = services
        self._run_turn = run_turn
        self._timeout = timeout
        self._pending_timeout = pending_timeout
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: dict[int, asyncio.TimerHandle] = {}
        self._closed = False

    @property
    def running(self) -> int:
        return len(self._tasks)

    async def recover(self) -> int:
        """Fail what a previous process left pending or claimed: it cannot finish now."""
        count = await self._services.store.write(
            lambda c: rows.fail_interrupted(c, "interrupted: the gateway restarted during the handoff")
        )
        if count:
            log.warning("handoff.interrupted_rows_failed", count=count)
        return int(count)

    async def aclose(self) -> None:
        """Stop: cancel running handoffs (each marks its row failed on the way out)."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)

    # ---------------------------------------------------------------- request

    async def request(self, source: InboundMessage, source_key: str, target: str, *,
                      announce: Callable[[], Awaitable[None]] | None = None) -> str:
        """Validate and start a handoff; returns the row id as text for logs. Raises
        HandoffRefusedError with the reason when it cannot start."""
        s = self._services
        if self._closed:
            raise HandoffRefusedError("The gateway is shutting down; try /handoff again in a minute.")
        adapter = s.adapters.get(target)
        if adapter is None or target in _REQUEST_ONLY:
            enabled = ", ".join(sorted(p for p in s.adapters if p not in _REQUEST_ONLY)) or "none"
            raise HandoffRefusedError(
                f"'{target}' is not a platform this gateway can hand off to (enabled: {enabled})."
            )
        if s.home_channels is None:
            raise HandoffRefusedError("Handoff is not available in this gateway.")
        home = await s.home_channels.get(target)
        if home is None:
            raise HandoffRefusedError(
                f"{target} has no home channel yet. Send /sethome in the {target} chat where handed-off "
                "sessions should appear, then try again."
            )
        if s.lanes.busy(source_key):
            raise HandoffRefusedError(
                "A reply is still being written. Wait for it to finish (or /stop it), then /handoff again."
            )
        session_id = await s.index.current(source_key)
        if session_id is None:
            raise HandoffRefusedError("There is nothing to hand off yet: this chat has no session.")
        if (home.platform, home.chat_id, home.thread_id) == (source.platform, source.chat_id, source.thread_id):
            raise HandoffRefusedError(f"This chat is the {target} home channel already; nothing to move.")
        handoff_id = await s.store.write(
            lambda c: rows.insert_pending(
                c, session_id=session_id, source_key=source_key, source_platform=source.platform,
                source_chat_id=source.chat_id, source_thread_id=source.thread_id, target_platform=target,
                target_chat_id=home.chat_id,
            )
        )
        job = _Job(handoff_id, session_id, source, source_key, target, home)
        if announce is not None:
            with contextlib.suppress(Exception):
                await announce()
        task = asyncio.create_task(self._run(job), name=f"handoff:{handoff_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        timer = asyncio.get_running_loop().call_later(self._pending_timeout, self._expire_soon, handoff_id)
        self._timers[handoff_id] = timer
        log.info("handoff.requested", handoff_id=handoff_id, session_id=session_id, target=target)
        return str(handoff_id)

    def _expire_soon(self, handoff_id: int) -> None:
        self._timers.pop(handoff_id, None)
        if self._closed:
            return
        task = asyncio.create_task(self._expire(handoff_id), name=f"handoff-expire:{handoff_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _expire(self, handoff_id: int) -> None:
        # Only a row nobody claimed: a claimed or finished one is never touched.
        with contextlib.suppress(Exception):
            if await self._services.store.write(
                lambda c: rows.fail_if_pending(c, handoff_id, "timed out waiting for the gateway to pick it up")
            ):
                log.warning("handoff.pending_timeout", handoff_id=handoff_id)

    # -------------------------------------------------------------------- run

    async def _run(self, job: _Job) -> None:
        s = self._services
        with structlog.contextvars.bound_contextvars(handoff_id=job.handoff_id, session_id=job.session_id):
            try:
                claimed = await s.store.write(lambda c: rows.claim(c, job.handoff_id))
            except Exception as exc:  # the pending timeout fails the row; the user hears now
                log.error("handoff.claim_failed", error=str(exc))
                await self._tell_source(job, f"Handoff failed: {exc}. Your session here is intact; "
                                             "try /handoff again in a moment.")
                return
            timer = self._timers.pop(job.handoff_id, None)
            if timer is not None:
                timer.cancel()
            if not claimed:
                log.info("handoff.not_claimed")  # expired (or failed) before we got to it
                await self._tell_source(job, "Handoff failed: it timed out before it could start. "
                                             "Your session here is intact; try /handoff again.")
                return
            progress: dict[str, str] = {}  # the destination key, once known (to stop its turn on failure)
            try:
                async with asyncio.timeout(self._timeout):
                    target_key, title, where = await self._transfer(job, progress)
            except asyncio.CancelledError:
                await self._fail(job, "the gateway stopped during the handoff", progress.get("key"))
                raise
            except TimeoutError:
                await self._fail(job, f"timed out after {self._timeout:g}s", progress.get("key"))
                return
            except Exception as exc:
                await self._fail(job, str(exc) or type(exc).__name__, progress.get("key"))
                return
            if not await s.store.write(lambda c: rows.complete(c, job.handoff_id, target_key=target_key)):
                log.warning("handoff.complete_lost")  # someone failed it meanwhile; say so honestly
                await self._tell_source(job, "Handoff failed: it was cancelled while finishing. "
                                             "Your session here is intact; try /handoff again.")
                return
            await s.index.unbind(job.source_key, job.session_id)
            log.info("handoff.completed", target=job.target, target_key=target_key)
            await self._tell_source(
                job,
                f"{HANDOFF_DONE_PREFIX}: handed off to {job.target}. The session \"{title}\" now continues "
                f"in {where}.\nNew messages here start a fresh session. To come back to this one, send:\n"
                f"/resume {title}",
            )

    async def _transfer(self, job: _Job, progress: dict[str, str]) -> tuple[str, str, str]:
        """Thread, binding, synthetic turn. Raises with a readable reason on failure."""
        s = self._services
        title = await self._ensure_title(job.session_id)
        adapter = s.adapters[job.target]
        home = job.home
        thread_id = home.thread_id
        if home.chat_type is not ChatType.DM:
            # A DM has no threads a reply could come back in: the DM itself is the place.
            try:
                created = await adapter.create_thread(home.chat_id, f"Hermes — {title}")
            except Exception as exc:
                raise RuntimeError(f"could not open a thread in the {job.target} home channel ({exc})") from exc
            if created is not None:
                thread_id = created
        chat_type = home.chat_type
        if thread_id != home.thread_id and chat_type is ChatType.CHANNEL:
            # Discord and Slack report a message in a channel's thread as a THREAD chat
            # (Telegram's forum topics stay GROUP): describe it as its messages will be.
            chat_type = ChatType.THREAD
        where_msg = InboundMessage(
            platform=job.target,
            chat_id=home.chat_id,
            chat_type=chat_type,
            user_id=None,  # the thread is shared: anyone authorized there continues the session
            text=synthetic_prompt(job.source.platform, title),
            thread_id=thread_id,
            user_name="handoff",
            redeliverable=False,
        )
        key = build_session_key(where_msg, s.key_settings or SessionKeySettings())
        progress["key"] = key
        await s.index.rebind(key, job.session_id, where_msg)
        await s.store.write(
            lambda c: rows.transition(c, job.handoff_id, to=rows.CLAIMED, only_from=(rows.CLAIMED,),
                                      target_thread_id=thread_id, target_key=key)
        )
        delivered = await self._run_turn(where_msg, key, where_msg.text)
        if not delivered:
            raise RuntimeError(await self._send_failure_reason(key, job.target))
        where = f"a new thread of the {job.target} home channel" if thread_id != home.thread_id \
            else f"the {job.target} home channel"
        return key, title, where

    async def _send_failure_reason(self, key: str, target: str) -> str:
        row = await self._services.store.read(
            lambda c: c.execute(
                "SELECT error FROM gateway_outbound WHERE session_key = ? AND status = 'failed' "
                "ORDER BY id DESC LIMIT 1",
                (key,),
            ).fetchone()
        )
        if row is not None and row["error"]:
            return f"sending the summary to {target} failed ({row['error']})"
        return f"the agent could not write its summary in {target} (its error notice is there)"

    async def _ensure_title(self, session_id: str) -> str:
        """The session's title, giving it one first if it has none (``/resume`` needs a name)."""
        store = self._services.store
        session = await store.get_session(session_id) or {}
        if session.get("title"):
            return str(session["title"])
        wanted = f"handoff-{session_id.rsplit('_', 1)[-1]}"
        for _ in range(3):
            try:
                return await store.set_session_title(session_id, wanted) or wanted
            except TitleConflictError as exc:
                wanted = exc.suggestion
            except InvalidTitleError:
                break
        return session_id

    async def _fail(self, job: _Job, reason: str, target_key: str | None) -> None:
        s = self._services
        moved = False
        with contextlib.suppress(Exception):
            moved = await s.store.write(lambda c: rows.fail(c, job.handoff_id, reason))
        if target_key is not None:
            with contextlib.suppress(Exception):
                await s.lanes.cancel_running(target_key)
        log.warning("handoff.failed", reason=reason, marked=moved)
        await self._tell_source(
            job,
            f"Handoff failed: {reason}.\nYour session here is intact; try /handoff {job.target} again.",
        )

    async def _tell_source(self, job: _Job, text: str) -> None:
        src = job.source
        with contextlib.suppress(Exception):
            await self._services.delivery.send(
                OutboundMessage(src.platform, src.chat_id, text, src.thread_id, src.message_id, SendKind.NOTICE)
            )
