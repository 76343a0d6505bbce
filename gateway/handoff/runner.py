"""/handoff: move a live session to another platform's home channel.

Inside the daemon, no polling: the command inserts a ``pending`` row and
starts a task that claims it (compare-and-set), opens a thread in the home
channel, binds that thread's session key to the same session id, and runs a
synthetic user turn in the thread's lane so the agent confirms and summarises
there. The source chat then gets a reply starting with ``HANDOFF_DONE_PREFIX``
(the terminal client exits on it) and the ``/resume <title>`` way back.

The destination key is never hand-built: the destination adapter describes
a later message in the new thread (``Adapter.inbound_in_thread``) and the
router's own ``build_session_key`` turns that into the key, so the next real
message there lands in the same session. Where that cannot work (a Telegram
group without topics) the adapter says why and the handoff is refused.

The state machine follows the issue: the only timeout is for a row nobody
claimed (``fail_if_pending``). Once claimed, the transfer runs to completion
or to its own failure (thread creation, the agent's turn, the send; each has
its own bounds), so a late timeout can never fail a claimed handoff.

While a handoff is in flight its source key is held: the router refuses that
chat's turns and queued commands, so nothing interleaves with the synthetic
turn. A failure marks the row ``failed`` with the (redacted) reason, puts the
destination key back as it was, and frees the session for a retry. The
transcript is never touched by a failure.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Awaitable, Callable

import structlog

from adapters.base import ChatType, InboundMessage, OutboundMessage, SendKind
from gateway.errors import HandoffRefusedError
from gateway.handoff import store as rows
from gateway.handoff.job import Job, Progress, TurnRunner, synthetic_prompt
from gateway.handoff.marker import HANDOFF_DONE_PREFIX
from gateway.handoff.remote import ClusterHandoffs, done_text, failed_text, unclaimed_reason, where_text
from gateway.logs import redact
from gateway.routing.home_channels import HomeChannel
from gateway.routing.services import Services
from gateway.routing.session_key import build_session_key
from storage import outbound
from storage.errors import InvalidTitleError, TitleConflictError

__all__ = ["HANDOFF_DONE_PREFIX", "HandoffRefusedError", "HandoffRunner", "TurnRunner"]

log = structlog.get_logger("hermes.handoff")

#: at stop, how long running handoffs get to fail on their own (the lanes were
#: drained, so their summary turns are already stopped) before they are cancelled
STOP_GRACE = 5.0
#: platforms that only answer requests and cannot host a conversation
_REQUEST_ONLY = frozenset({"api-server", "cli"})
_STILL_WRITING = "A reply is still being written. Wait for it to finish (or /stop it), then /handoff again."

class HandoffRunner(ClusterHandoffs):
    def __init__(self, services: Services, run_turn: TurnRunner, *, timeout: float) -> None:
        self._services = services
        self._run_turn = run_turn
        #: how long a row may stay ``pending`` (unclaimed) before it is failed
        self._timeout = timeout
        self._tasks: set[asyncio.Task[None]] = set()
        self._timers: dict[int, asyncio.TimerHandle] = {}
        #: source key -> target platform, while its handoff is in flight
        self._holding: dict[str, str] = {}
        self._closed = False
        self._init_cluster()

    @property
    def running(self) -> int:
        return len(self._tasks)

    def in_flight(self, source_key: str) -> str | None:
        """The platform this key's session is being handed off to right now, if any."""
        return self._holding.get(source_key)

    async def settled(self) -> None:
        """Return once no handoff (or its pending timer's work) is running."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))

    async def recover(self) -> int:
        """Fail what a previous process left pending or claimed: it cannot finish now."""
        count = await self._services.store.write(
            lambda c: rows.fail_interrupted(c, "interrupted: the gateway restarted during the handoff")
        )
        if count:
            log.warning("handoff.interrupted_rows_failed", count=count)
        return int(count)

    async def aclose(self) -> None:
        """Stop (after the lanes were drained): running handoffs fail on their own, their
        summary turns being stopped; what is still stuck after ``STOP_GRACE`` is
        cancelled. Either way each marks its row failed and undoes its binding."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        if not self._tasks:
            return
        for task in self._tasks:
            if task.get_name().startswith("handoff-wait:"):
                task.cancel()  # another node's work to wait for: nothing here to let finish
        _, stuck = await asyncio.wait(list(self._tasks), timeout=STOP_GRACE)
        for task in stuck:
            task.cancel()
        if stuck:
            await asyncio.wait(stuck, timeout=STOP_GRACE)

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
        home = await s.home_channels.get(target)
        if home is None:
            raise HandoffRefusedError(
                f"{target} has no home channel yet. Send /sethome in the {target} chat where handed-off "
                "sessions should appear, then try again."
            )
        if (home.platform, home.chat_id, home.thread_id) == (source.platform, source.chat_id, source.thread_id):
            raise HandoffRefusedError(f"This chat is the {target} home channel already; nothing to move.")
        try:
            problem = await adapter.handoff_refusal(home.chat_id, home.chat_type, home.thread_id)
        except Exception as exc:  # cannot tell now: opening the thread will say what is wrong
            log.warning("handoff.home_check_failed", target=target, error=redact(str(exc)))
            problem = None
        if problem:
            raise HandoffRefusedError(f"Cannot hand off to {target}: {problem}.")
        if self.lane_elsewhere is not None and await self.lane_elsewhere(source_key):
            raise HandoffRefusedError(_STILL_WRITING)  # this chat's turn runs on another node
        # From the busy check to taking the hold there is no await: a message of
        # this chat either runs before (and /handoff is refused) or is refused after.
        if source_key in self._holding:
            raise HandoffRefusedError("This session is already being handed off; wait for that to finish.")
        if s.lanes.busy(source_key):
            raise HandoffRefusedError(_STILL_WRITING)
        self._holding[source_key] = target
        try:
            handoff_id, session_id = await self._insert(source, source_key, target, home)
        except BaseException:
            self._holding.pop(source_key, None)
            raise
        job = Job(handoff_id, session_id, source, source_key, target, home)
        if announce is not None:
            with contextlib.suppress(Exception):
                await announce()
        if self.remote(target):  # another node holds the target's connection: it claims the row
            self._spawn(self._await_remote(job), f"handoff-wait:{handoff_id}")
        else:
            self._local.add(handoff_id)
            self._spawn(self._run(job), f"handoff:{handoff_id}")
        timer = asyncio.get_running_loop().call_later(self._timeout, self._expire_soon, handoff_id)
        self._timers[handoff_id] = timer
        log.info("handoff.requested", handoff_id=handoff_id, session_id=session_id, session_key=source_key,
                 target=target)
        return str(handoff_id)

    async def _insert(self, source: InboundMessage, source_key: str, target: str,
                      home: HomeChannel) -> tuple[int, str]:
        s = self._services
        session_id = await s.index.current(source_key)
        if session_id is None:
            raise HandoffRefusedError("There is nothing to hand off yet: this chat has no session.")
        handoff_id = await s.store.write(
            lambda c: rows.insert_pending(
                c, session_id=session_id, source_key=source_key, source_platform=source.platform,
                source_chat_id=source.chat_id, source_thread_id=source.thread_id, target_platform=target,
                target_chat_id=home.chat_id,
            )
        )
        return int(handoff_id), session_id

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---------------------------------------------------------------- timeout

    def _expire_soon(self, handoff_id: int) -> None:
        self._timers.pop(handoff_id, None)
        if not self._closed:
            self._spawn(self._expire_quietly(handoff_id), f"handoff-expire:{handoff_id}")

    async def _expire_quietly(self, handoff_id: int) -> None:
        with contextlib.suppress(Exception):
            await self.expire(handoff_id)

    async def expire(self, handoff_id: int) -> bool:
        """The pending timeout: fail the row only if nobody claimed it yet. A claimed or
        finished row is never touched. True if this call failed it."""
        reason = "timed out waiting for the gateway to pick it up"
        if handoff_id in self._woken:  # another node was to claim it: say which connection was missing
            target = await self._services.store.read(lambda c: rows.get(c, handoff_id))
            reason = unclaimed_reason(target.target_platform if target is not None else "the platform")
        failed = bool(await self._services.store.write(lambda c: rows.fail_if_pending(c, handoff_id, reason)))
        self.woken(handoff_id)
        if failed:
            log.warning("handoff.pending_timeout", handoff_id=handoff_id)
        else:
            log.info("handoff.pending_timeout_ignored", handoff_id=handoff_id)  # claimed or finished already
        return failed

    # -------------------------------------------------------------------- run

    async def _run(self, job: Job) -> None:
        with structlog.contextvars.bound_contextvars(handoff_id=job.handoff_id, session_id=job.session_id,
                                                     session_key=job.source_key):
            try:
                await self._claim_and_transfer(job)
            finally:
                self._release(job)
                self._local.discard(job.handoff_id)

    def _release(self, job: Job) -> None:
        if job.tell and self._holding.get(job.source_key) == job.target:
            del self._holding[job.source_key]

    async def _claim_and_transfer(self, job: Job) -> None:
        s = self._services
        try:
            claimed = await s.store.write(lambda c: rows.claim(c, job.handoff_id))
        except Exception as exc:
            reason = redact(str(exc) or type(exc).__name__)
            log.error("handoff.claim_failed", error=reason)
            with contextlib.suppress(Exception):  # else the pending timeout fails it
                await s.store.write(lambda c: rows.fail_if_pending(c, job.handoff_id, f"claim failed: {reason}"))
            self._release(job)
            await self._tell_source(job, f"Handoff failed: {reason}. Your session here is intact; "
                                         "try /handoff again in a moment.")
            return
        timer = self._timers.pop(job.handoff_id, None)
        if timer is not None:
            timer.cancel()
        if not claimed:
            log.info("handoff.not_claimed")  # the pending timeout got there first
            self._release(job)
            await self._tell_source(job, "Handoff failed: it timed out before it could start. "
                                         "Your session here is intact; try /handoff again.")
            return
        progress = Progress()
        try:
            target_key, title, where = await self._transfer(job, progress)
        except asyncio.CancelledError:
            await self._fail(job, "the gateway stopped during the handoff", progress)
            raise
        except Exception as exc:
            await self._fail(job, str(exc) or type(exc).__name__, progress)
            return
        if not await s.store.write(lambda c: rows.complete(c, job.handoff_id, target_key=target_key)):
            # Only a second process could have moved a claimed row; believe the row.
            await self._fail(job, "it was cancelled while finishing", progress, mark=False)
            return
        await s.index.unbind(job.source_key, job.session_id)
        log.info("handoff.completed", target=job.target, target_key=target_key)
        self._release(job)
        await self._tell_source(job, done_text(job.target, title, where))

    async def _transfer(self, job: Job, progress: Progress) -> tuple[str, str, str]:
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
        # The person who chose the home speaks for it: where keys are per user (a
        # group without threads, thread_sessions_per_user) the session is theirs,
        # and their next message there is the one that continues it.
        later = adapter.inbound_in_thread(home.chat_id, home.chat_type, thread_id, user_id=home.set_by,
                                          text=synthetic_prompt(job.source.platform, title))
        where_msg = dataclasses.replace(later, redeliverable=False)
        key = build_session_key(where_msg, s.key_settings)
        progress.target_key = key

        async def bind() -> None:
            # In the destination's lane, right before the summary turn: what already
            # waited there (the home chat's own messages) still ran on its own session.
            progress.binding = asyncio.ensure_future(s.index.bind_for_handoff(key, job.session_id, where_msg))
            prior = await asyncio.shield(progress.binding)  # a stop mid-write still lets _fail undo it
            await s.store.write(
                lambda c: rows.transition(c, job.handoff_id, to=rows.CLAIMED, only_from=(rows.CLAIMED,),
                                          target_thread_id=thread_id, target_key=key)
            )
            log.info("handoff.bound", target_key=key, replaced=prior.session_id)

        delivered = await self._run_turn(where_msg, key, where_msg.text, prepare=bind)
        if not delivered:
            raise RuntimeError(await self._send_failure_reason(key, job.target))
        return key, title, where_text(job.target, home, thread_id)

    async def _send_failure_reason(self, key: str, target: str) -> str:
        error = await self._services.store.read(lambda c: outbound.last_failure(c, key))
        if error:
            return f"sending the summary to {target} failed ({error})"
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

    async def _fail(self, job: Job, reason: str, progress: Progress, *, mark: bool = True) -> None:
        reason = redact(reason)
        # The row and the binding are put right even if this task is cancelled meanwhile.
        undo = asyncio.ensure_future(self._undo(job, reason, progress, mark))
        try:
            marked, restored = await asyncio.shield(undo)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                await undo
            raise
        log.warning("handoff.failed", reason=reason, marked=marked, target_key=progress.target_key,
                    restored=restored)
        self._release(job)
        await self._tell_source(job, failed_text(reason, job.target))

    async def _undo(self, job: Job, reason: str, progress: Progress, mark: bool) -> tuple[bool, bool]:
        s = self._services
        marked = restored = False
        if mark:
            with contextlib.suppress(Exception):
                marked = bool(await s.store.write(lambda c: rows.fail(c, job.handoff_id, reason)))
        if progress.target_key is not None and progress.binding is not None:
            # The destination chat gets back what it had; only if it still points at us.
            with contextlib.suppress(Exception):
                prior = await progress.binding
                restored = await s.index.restore(progress.target_key, job.session_id, prior)
        return marked, restored

    async def _tell_source(self, job: Job, text: str) -> None:
        if not job.tell:
            return  # another node's request: it tells its chat when it sees the row end
        src = job.source
        with contextlib.suppress(Exception):
            await self._services.delivery.send(
                OutboundMessage(src.platform, src.chat_id, redact(text), src.thread_id, src.message_id,
                                SendKind.NOTICE)
            )
