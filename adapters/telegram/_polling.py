"""Polling: our own loop over raw ``getUpdates`` results, not PTB's ``Updater``.

The gateway needs control the ``Updater`` does not give:

- **Malformed updates** are parsed one at a time (``UpdateIntake``); one that
  fails is acknowledged with the rest of its batch. PTB's Updater parses the
  batch as a whole and retries it forever.
- **409 Conflict** (another process polls this token) is retried with
  exponential backoff; past ``conflict_retries`` conflicts within
  ``conflict_window`` seconds (in a row, or interleaved with successes, as
  when two daemons take turns) the adapter raises ``FatalAdapterError`` and
  health says "failed". A conflict after polling was healthy first ends this
  connection, so health shows "restarting" rather than "connected" while the
  bot is deaf.
- **A hung getUpdates** (no answer within ``poll_timeout + watchdog_grace``;
  only getUpdates answers count, never sends) is abandoned and polling
  restarts on a fresh connection; after ``restart_after_failures`` in a row
  the connection is given up and the runner restarts it.
- **Acknowledgement**: the offset moves past an update only in the next
  getUpdates, after the router has taken the update. A crash before that redelivers it, and the
  router's dedupe on ``update:<update_id>`` makes that one turn. An album's parts are not acknowledged until the
  album reached the router (``UpdateIntake.albums.held``): while one is collected, getUpdates asks
  again from its first part (every ``album_window / 2``, at most ``HOLD_RECHECK``, with no long poll), takes only the
  updates it has not taken yet, and so still sees the album's later parts. A crash within the
  window redelivers the parts, and the album's dedupe id makes that one turn. A dispatch still
  running when ``dispatch_wait`` ran out is held the same way (``UpdateIntake.held``, polls every
  ``DISPATCH_RECHECK``) until it ends, or ``DISPATCH_HOLD`` passed: then it is acknowledged.
- **Deferred** (the router answered ``Disposition.DEFERRED``: storage is away, nothing of the
  update was stored or answered): the offset goes back to the first deferred update, so the next
  getUpdates asks for it again, after a pause that grows from ``DEFER_PAUSE`` to ``DEFER_PAUSE_MAX``
  while updates keep being deferred (a database away for a minute is not a spin). Updates after
  it that the router took come again too, and its dedupe makes them duplicates. A dispatch
  deferred only after its update was acknowledged (it outlived ``DISPATCH_HOLD``) is lost: logged.

``ready`` is set once deleteWebhook and a first (short) getUpdates succeeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import Any

import structlog
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

from ..base import AdapterError, Disposition, FatalAdapterError
from ._client import BotConnection, TelegramBot, retry_seconds
from ._intake import UpdateIntake
from ._settings import TelegramSettings

__all__ = ["Poller"]

log = structlog.get_logger("hermes.telegram")

FINAL_ACK_TIMEOUT = 2.0
#: Shortest pause before polling again after a batch that moved nothing forward.
MIN_POLL_PAUSE = 0.01
#: Longest pause between the polls that ask again from an album's first part while it is collected.
HOLD_RECHECK = 0.25
#: Longest pause between the polls that ask again from an update whose dispatch still runs.
DISPATCH_RECHECK = 1.0
#: First and longest pause before asking again for an update the router deferred (storage away).
DEFER_PAUSE = 0.5
DEFER_PAUSE_MAX = 5.0

# Internal signals of the poll loop, not errors: ``_fetch`` raises them and ``run`` catches
# them at once; they never leave this module, so they stay outside the GatewayError tree.


class _Stalled(Exception):
    """getUpdates gave no answer within the watchdog bound (internal to the poll loop)."""


class _Stopped(Exception):
    """The adapter is stopping while getUpdates waits (internal to the poll loop)."""


class Poller:
    def __init__(self, settings: TelegramSettings, connection: BotConnection, intake: UpdateIntake,
                 ready: asyncio.Event, stopping: asyncio.Event) -> None:
        self._settings = settings
        self._connection = connection
        self._intake = intake
        self._ready = ready
        self._stopping = stopping
        #: next getUpdates offset: one past the newest update handed to the router
        self._offset: int | None = None
        self._acked: int | None = None
        self._conflicts = 0
        self._conflict_times: deque[float] = deque()
        #: getUpdates stalls or failures in a row (health is "degraded" while there are any)
        self.failures = 0
        #: observability for tests and /status: how often the watchdog restarted polling
        self.stall_restarts = 0
        #: the pause before asking again for a deferred update (0 while nothing is deferred)
        self._defer_pause = 0.0

    async def run(self, bot: TelegramBot) -> None:
        """Poll until the adapter stops; raises when this connection must be given up."""
        s = self._settings
        await bot.delete_webhook(drop_pending_updates=False)
        idle_backoff = 0.0
        last_stuck: str | None = None
        while not self._stopping.is_set():
            if self._ask_again():  # a dispatch deferred late, after its batch was left
                await self._pause_deferred()
                continue
            # The first call is a short poll: "ready" must not wait a whole long poll.
            timeout = s.poll_timeout if self._ready.is_set() else 0
            offset, held = await self._held_offset()
            if held:
                timeout = 0
            try:
                raw = await self._fetch(bot, offset, timeout)
            except _Stopped:
                break
            except _Stalled:
                self.stall_restarts += 1
                self._give_up_after_failure(
                    f"getUpdates gave no answer within {timeout + s.watchdog_grace:g}s",
                    event="telegram.poll_stalled",
                )
                continue  # at once, on a fresh connection: the stall already took its time
            except Conflict as exc:
                await self._on_conflict(bot, exc)
                continue
            except RetryAfter as exc:
                await self._pause(retry_seconds(exc))
                continue
            except InvalidToken:
                raise FatalAdapterError(
                    "Telegram no longer accepts the bot token (TELEGRAM_BOT_TOKEN was revoked or changed)."
                ) from None
            except TelegramError as exc:
                self._give_up_after_failure(f"getUpdates failed: {exc.message}", event="telegram.poll_failed")
                await self._pause(min(2.0 ** self.failures, 30.0))
                continue
            self._acked = offset
            self.failures = 0
            self._conflicts = 0
            if not self._ready.is_set():
                self._ready.set()
                log.info("telegram.polling", bot=self._connection.username, poll_timeout=s.poll_timeout)
            progressed = await self._take_batch(bot, raw, taken_from=offset if held else None)
            if self._ask_again():
                await self._pause_deferred()
                continue
            if raw:
                self._defer_pause = 0.0
            if progressed or held or not raw:
                idle_backoff, last_stuck = 0.0, None
                continue
            # Updates came back but none could be acknowledged (no usable update_id), so the
            # server may send the very same batch again: never a spin loop. The same batch
            # again doubles the pause (to 30 s), and its warning is logged only then.
            stuck = repr(raw)
            if stuck == last_stuck:
                idle_backoff = min(max(idle_backoff * 2, 0.5), 30.0)
                log.warning("telegram.batch_repeated", updates=len(raw), retry_in=idle_backoff)
            else:
                idle_backoff = MIN_POLL_PAUSE
            last_stuck = stuck
            await self._pause(idle_backoff)

    async def _held_offset(self) -> tuple[int | None, bool]:
        """The offset of the next getUpdates, and whether it holds back an update not yet taken (an
        album not yet dispatched, a dispatch still running)."""
        intake = self._intake
        held = intake.held()
        if held is None or self._offset is None or held >= self._offset:
            return self._offset, False
        # Asked again at once, the same updates would come back at once: a spin. Wait for the album
        # or the dispatch to move, or a while (within an album's window), so that later parts (and
        # other chats' messages) are still seen in time.
        album = intake.albums.held() is not None
        await intake.changed(min(intake.album_window() / 2, HOLD_RECHECK) if album else DISPATCH_RECHECK)
        if self._ask_again():  # what was held came back deferred meanwhile: ask for it again
            await self._pause_deferred()
            return self._offset, False
        held = intake.held()
        if held is None or held >= self._offset:
            return self._offset, False
        return held, True

    def _ask_again(self) -> bool:
        """Move the offset back to the first update the router deferred, if any; True if it moved."""
        deferred = self._intake.take_deferred()
        if deferred is None:
            return False
        if self._acked is not None and deferred < self._acked:
            # Its dispatch outlived dispatch_wait, and the next getUpdates confirmed it already.
            log.error("telegram.deferred_after_ack", update_id=deferred, acked=self._acked)
            deferred = self._acked
        if self._offset is None or deferred < self._offset:
            self._offset = deferred
            return True
        return False

    async def _pause_deferred(self) -> None:
        self._defer_pause = min(max(self._defer_pause * 2, DEFER_PAUSE), DEFER_PAUSE_MAX)
        log.info("telegram.deferred", offset=self._offset, retry_in=self._defer_pause)
        await self._pause(self._defer_pause)

    async def acknowledge(self, bot: TelegramBot) -> None:
        """At a disconnect: acknowledge what the router has taken, so a restart does not fetch it again."""
        self._ask_again()
        offset, held = self._offset, self._intake.held()
        if offset is not None and held is not None and held < offset:
            offset = held  # its dispatch still runs (the database away, say): Telegram keeps it
        if offset is None or offset == self._acked or (self._acked is not None and offset < self._acked):
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(
                bot.get_raw_updates(offset=offset, long_poll=0, read_timeout=FINAL_ACK_TIMEOUT),
                FINAL_ACK_TIMEOUT,
            )
            self._acked = offset

    async def _fetch(self, bot: TelegramBot, offset: int | None, long_poll: int) -> Any:
        """One getUpdates, abandoned when it outlives the watchdog bound or the adapter stops."""
        deadline = long_poll + self._settings.watchdog_grace
        fetch = asyncio.ensure_future(
            bot.get_raw_updates(offset=offset, long_poll=long_poll, read_timeout=deadline + 5.0)
        )
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            done, _ = await asyncio.wait({fetch, stop}, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not fetch.done():
                fetch.cancel()
                await asyncio.wait({fetch})
        if fetch in done:
            return fetch.result()
        if stop in done:
            raise _Stopped
        raise _Stalled

    def _give_up_after_failure(self, reason: str, *, event: str) -> None:
        limit = self._settings.restart_after_failures
        self.failures += 1
        log.warning(event, reason=reason, failures=self.failures, limit=limit)
        if self.failures >= limit:
            self.failures = 0
            raise AdapterError(f"{reason} ({limit} times in a row)")

    async def _on_conflict(self, bot: TelegramBot, exc: Conflict) -> None:
        s = self._settings
        now = time.monotonic()
        self._conflicts += 1  # in a row: sets the backoff
        # Counted over a window, not only in a row: two pollers on one token take turns, and
        # each one's successes between conflicts must not hide that from both of them.
        self._conflict_times.append(now)
        while self._conflict_times and self._conflict_times[0] < now - s.conflict_window:
            self._conflict_times.popleft()
        recent = len(self._conflict_times)
        if recent > s.conflict_retries:
            self._conflicts = 0
            self._conflict_times.clear()
            log.error("telegram.conflict_fatal", conflicts=recent, window=s.conflict_window, error=exc.message)
            raise FatalAdapterError(
                f"Telegram reports another getUpdates consumer for this bot token ({recent} conflicts within "
                f"{s.conflict_window:g}s: {exc.message}). Another gateway or bot process is using "
                "TELEGRAM_BOT_TOKEN; stop it (or give this gateway its own bot), then restart."
            )
        delay = min(s.conflict_backoff * 2 ** (self._conflicts - 1), s.conflict_backoff_max)
        log.warning("telegram.conflict", conflicts=recent, limit=s.conflict_retries, retry_in=delay,
                    error=exc.message)
        if "webhook" in exc.message.lower():
            with contextlib.suppress(TelegramError):
                await bot.delete_webhook(drop_pending_updates=False)
        if self._ready.is_set():
            # We were receiving and now are not: say so (health leaves "connected"); the
            # runner reconnects, and the conflict count goes on from here.
            raise AdapterError(f"polling conflict: {exc.message}")
        await self._pause(delay)

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake at once when the adapter stops."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _take_batch(self, bot: TelegramBot, raw: Any, *, taken_from: int | None = None) -> bool:
        """Hand every update to the router; True if the offset moved. ``taken_from``: the batch was
        asked for again from there (an album held), so the updates below ``_offset`` were taken."""
        if not isinstance(raw, list):
            log.warning("telegram.batch_malformed", type=type(raw).__name__)
            return False
        progressed = False
        tasks: list[asyncio.Task[Disposition | None]] = []
        for item in raw:
            update_id = item.get("update_id") if isinstance(item, dict) else None
            if not isinstance(update_id, int) or isinstance(update_id, bool):
                log.warning("telegram.update_malformed", update_id=None, error="no integer update_id")
                continue
            if taken_from is not None and self._offset is not None and taken_from <= update_id < self._offset:
                continue
            if self._offset is None or update_id >= self._offset:
                self._offset = update_id + 1
                progressed = True
            task = self._intake.take(bot, update_id, item)
            if task is not None:
                tasks.append(task)
        if tasks:
            await asyncio.wait(tasks, timeout=self._settings.dispatch_wait)
        return progressed
