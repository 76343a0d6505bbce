"""Slack's deliveries of one event (``event_id``): acknowledged once the router has taken it.

Slack retries an event its app did not acknowledge (an HTTP answer that is not 2xx or does not
come within 3 s; a Socket Mode envelope not acked within 3 s) three times: at once, after about a
minute, after about five; the retry says which it is (``X-Slack-Retry-Num``, ``retry_attempt``).
So the acknowledgement waits for the router's disposition (``ACK_WAIT`` at most), and an event
the router deferred (``Disposition.DEFERRED``: storage away, nothing stored, its dedupe claim
released) is left unacknowledged for Slack to bring again. The last retry is dispatched with
``platform_retries=False``: it gets the router's notice rather than silence.

Per ``event_id`` (bounded, like ``_bounded``) the dispatch is remembered: a retry of one still
running joins it (waits on it again) rather than running it twice or dropping it as a duplicate;
a retry of one finished and not deferred is acknowledged at once; a retry of a deferred one is
dispatched again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import structlog

from ..base import Disposition, InboundMessage
from ._bounded import BoundedMap

__all__ = ["ACK_WAIT", "LAST_RETRY", "EventDeliveries", "retry_number"]

log = structlog.get_logger("hermes.slack")

#: How long an event's acknowledgement waits for the router. Slack waits 3 s for it, then retries
#: (HTTP: ``http_timeout``) whatever we answer later; answered within the bound, a deferred event is
#: refused in our words and a stored one acknowledged. The router returns once the question is
#: stored (or it knows storage is away), so the normal path waits only for that.
ACK_WAIT = 2.5
#: Slack's last retry of an event (``X-Slack-Retry-Num`` / ``retry_attempt`` 1, 2, 3).
LAST_RETRY = 3

Dispatch = asyncio.Task[Disposition | None]


def retry_number(value: object) -> int:
    """``X-Slack-Retry-Num`` or ``retry_attempt`` as a number (0: the first delivery, or unreadable)."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(0, value)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 6:
        return int(value)
    return 0


def _deferred(task: Dispatch) -> bool:
    return task.done() and not task.cancelled() and task.exception() is None and task.result() is Disposition.DEFERRED


class EventDeliveries:
    def __init__(self, schedule: Callable[[InboundMessage], Dispatch]) -> None:
        """``schedule(message)`` hands a message to the router in its chat's order."""
        self._schedule = schedule
        #: event_id -> (its dispatch, the message), or None: not for the router (acknowledged at once)
        self._events = BoundedMap()
        #: last-retry dispatches waiting on a first one (see ``_last_chance``)
        self.pending: set[Dispatch] = set()

    def take(self, event_id: str | None, retry: int,
             convert: Callable[[], InboundMessage | None]) -> Dispatch | None:
        """The dispatch a delivery of ``event_id`` (retry number ``retry``) waits on; None when there
        is nothing to wait for (not for the router, or malformed: ``convert()`` gave None)."""
        last = retry >= LAST_RETRY
        known: tuple[Dispatch, InboundMessage] | None = self._events.get(event_id) if event_id else None
        if event_id and event_id in self._events and known is None:
            log.info("slack.event_duplicate", event_id=event_id)
            return None
        if known is not None:
            task, message = known
            if not task.done():
                log.info("slack.event_retry_joined", event_id=event_id, retry=retry)
                if last and message.platform_retries:
                    task = self._last_chance(task, message)
                    self._events.put(event_id, (task, message))
                return task
            if not _deferred(task):
                log.info("slack.event_duplicate", event_id=event_id, retry=retry)
                return task
        converted = convert()
        if converted is None:
            if event_id:
                self._events.put(event_id, None)
            return None
        message = dataclasses.replace(converted, platform_retries=not last)
        task = self._schedule(message)
        if event_id:
            self._events.put(event_id, (task, message))
        return task

    def _last_chance(self, first: Dispatch, message: InboundMessage) -> Dispatch:
        """Slack's last retry came while the dispatch still runs: should that dispatch come back
        deferred, nothing will bring the message again, so it goes once more, for the notice."""

        async def chained() -> Disposition | None:
            await asyncio.wait({first})
            if _deferred(first):
                return await self._schedule(dataclasses.replace(message, platform_retries=False))
            return None if first.cancelled() or first.exception() is not None else first.result()

        task = asyncio.create_task(chained(), name=f"slack:last-retry:{message.chat_id}")
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)
        return task

    @staticmethod
    async def settled(task: Dispatch | None, event_id: str | None, bound: float = ACK_WAIT) -> bool:
        """Wait (``bound`` at most) for ``task``: whether its delivery may be acknowledged now (False:
        deferred, or still running, and Slack's retry brings it again)."""
        if task is None:
            return True
        if not task.done():
            await asyncio.wait({task}, timeout=bound)
        if not task.done():
            log.info("slack.event_unsettled", event_id=event_id)
            return False
        if _deferred(task):
            log.info("slack.event_deferred", event_id=event_id)
            return False
        return True
