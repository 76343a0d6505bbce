"""Albums: the messages of one ``media_group_id`` become one ``InboundMessage``.

Telegram sends an album (2 to 10 photos, videos, documents or audio files) as one message per
file, each its own update, sharing a ``media_group_id``; only one of them (usually the first)
carries the caption. The parts are collected per (chat, media group) until no new one came for
``window`` seconds (or ten are in), then dispatched once: every part's attachments in message
order, the caption of whichever part has one, the first part's message id, addressed if any part
is, and ``dedupe_id`` ``album:<chat>:<media_group_id>``, the same when the updates are delivered
again (a restart before they were acknowledged), so a redelivered album is one turn.

Order within a chat holds: another message of the chat flushes its open album first. A part
that arrives after its album was dispatched (a slow upload) goes out as an album of its own
(``album:<chat>:<group>:<message id>``); a part seen before (a redelivery) is dropped.

Acknowledgement (``held``): the poll loop must not acknowledge an update whose album has not
reached the router, or a crash within the window would lose it; ``held`` is the lowest such
update id, until the router took the album (or ``release_after`` seconds passed, as for any
update: ``DISPATCH_HOLD``). No task is created here: the window is a timer handle, cancelled by ``flush_all``.
An album the router deferred (``Disposition.DEFERRED``: storage away) is forgotten as sent, and
``take_deferred`` gives its lowest update id: the poll loop fetches its parts again, and they make
the same album (the same dedupe id) again.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from ..base import Disposition, InboundMessage

__all__ = ["MAX_PARTS", "AlbumCollector"]

#: Telegram's own limit of one media group.
MAX_PARTS = 10
#: Albums remembered after their dispatch (to tell late parts from redeliveries).
_REMEMBERED = 512


@dataclass
class _Album:
    chat_id: str
    group: str
    #: message id -> (update id, message)
    parts: dict[str, tuple[int, InboundMessage]] = field(default_factory=dict)
    timer: asyncio.TimerHandle | None = None


class AlbumCollector:
    def __init__(self, schedule: Callable[[InboundMessage], asyncio.Task[Disposition | None]], *,
                 window: Callable[[], float], release_after: Callable[[], float]) -> None:
        """``schedule`` hands a message to the router (in chat order) and returns its task;
        ``window`` and ``release_after`` are read when they are needed (tests change them)."""
        self._schedule = schedule
        self._window = window
        self._release_after = release_after
        self._open: dict[tuple[str, str], _Album] = {}
        #: (chat, group) of dispatched albums -> the message ids they had
        self._sent: OrderedDict[tuple[str, str], set[str]] = OrderedDict()
        #: dispatches the router has not finished taking: task -> (lowest update id, release time)
        self._unsettled: dict[asyncio.Task[Disposition | None], tuple[int, float]] = {}
        #: dispatched albums the router deferred (storage away): (chat, group) -> lowest update id
        self._deferred: dict[tuple[str, str], int] = {}
        self._changed = asyncio.Event()

    def add(self, update_id: int, group: str, message: InboundMessage) -> None:
        """Collect one part (a message with attachments and this ``media_group_id``)."""
        chat_id = message.chat_id
        key = (chat_id, group)
        message_id = message.message_id or str(update_id)
        if message_id in self._sent.get(key, ()):
            return  # delivered again after its album went out: the router has it
        for other in [k for k in self._open if k[0] == chat_id and k != key]:
            self._flush(other)
        album = self._open.get(key)
        if album is None:
            album = self._open[key] = _Album(chat_id, group)
        if message_id in album.parts:
            return
        album.parts[message_id] = (update_id, message)
        if album.timer is not None:
            album.timer.cancel()
            album.timer = None
        if len(album.parts) >= MAX_PARTS:
            self._flush(key)
            return
        album.timer = asyncio.get_running_loop().call_later(self._window(), self._flush, key)
        self._notify()

    def flush_chat(self, chat_id: str) -> None:
        """Dispatch the chat's open albums now (a later message of the chat must not overtake them)."""
        for key in [k for k in self._open if k[0] == chat_id]:
            self._flush(key)

    def flush_all(self) -> None:
        """Dispatch every open album now (at a disconnect)."""
        for key in list(self._open):
            self._flush(key)

    def held(self) -> int | None:
        """The lowest update id that must not be acknowledged yet, or None."""
        ids = [uid for album in self._open.values() for uid, _ in album.parts.values()]
        now = asyncio.get_running_loop().time()
        ids.extend(low for low, release in self._unsettled.values() if release > now)
        return min(ids, default=None)

    async def changed(self, within: float) -> None:
        """Wait until an album is collected further, dispatched or taken (at most ``within`` seconds)."""
        event = self._changed
        try:
            await asyncio.wait_for(event.wait(), within)
        except TimeoutError:
            pass

    # ------------------------------------------------------------------------------- inside

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _flush(self, key: tuple[str, str]) -> None:
        album = self._open.pop(key, None)
        if album is None:
            return
        if album.timer is not None:
            album.timer.cancel()
        parts = sorted(album.parts.items(), key=lambda kv: _order(kv[0]))
        messages = [m for _, (_, m) in parts]
        first = messages[0]
        seen = self._sent.get(key)
        dedupe = f"album:{album.chat_id}:{album.group}"
        if seen is not None:
            dedupe = f"{dedupe}:{first.message_id}"
        else:
            seen = self._sent[key] = set()
            while len(self._sent) > _REMEMBERED:
                self._sent.popitem(last=False)
        seen.update(album.parts)
        merged = dataclasses.replace(
            first,
            text=next((m.text for m in messages if m.text), ""),
            attachments=tuple(a for m in messages for a in m.attachments),
            addressed=any(m.addressed for m in messages),
            dedupe_id=dedupe,
        )
        task = self._schedule(merged)
        low = min(uid for uid, _ in album.parts.values())
        self._unsettled[task] = (low, asyncio.get_running_loop().time() + self._release_after())
        task.add_done_callback(partial(self._settled, key))
        self._notify()

    def take_deferred(self) -> int | None:
        """The lowest update id of an album the router deferred since the last call (its parts must
        be fetched again), or None."""
        low = min(self._deferred.values(), default=None)
        self._deferred.clear()
        return low

    def _settled(self, key: tuple[str, str], task: asyncio.Task[Disposition | None]) -> None:
        low, _ = self._unsettled.pop(task, (None, 0.0))
        if low is not None and not task.cancelled() and task.exception() is None \
                and task.result() is Disposition.DEFERRED:
            # Not taken: its parts come again and must make the album again, not count as seen.
            self._sent.pop(key, None)
            self._deferred[key] = low
        self._notify()


def _order(message_id: str) -> tuple[int, str]:
    return (int(message_id), "") if message_id.isdigit() else (0, message_id)
