"""An answer shown while the model writes it: core's listener on one side, a platform's
``ReplyStream`` on the other.

``StreamDriver`` is the ``core.AnswerListener`` of one turn. The agent's
callbacks only change the text and wake the driver's own task, so a slow
platform never slows the model's stream. That task calls ``update`` paced
for a throttled stream (messages edited in place): the first once the answer
has ``streaming.min_chars`` characters or ``streaming.first_delay`` seconds
after its first text, then at most one per ``streaming.edit_interval``, within
the chat's budget (``ChatPacer``, shared by every answer streaming in that
chat, the final edit included: one edit per interval on average, two back to
back), and none until a 429's ``retry_after`` has passed; what was
written meanwhile goes out with the next one, so nothing is lost or sent
twice. An unthrottled stream (SSE, a terminal) gets every new text at once.

Only a preview flows through here. The answer itself is stored by the agent
and delivered by ``Delivery.finish_stream``, which ends the stream with the
final text (or sends it anew when the stream cannot).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import structlog

from adapters.base import OutboundMessage, RateLimitedError, ReplyStream, SendResult
from gateway.config import StreamingConfig

__all__ = ["ChatPacer", "StreamDriver", "stopped_text"]

log = structlog.get_logger("hermes.stream")

#: at most this many tool-progress lines are shown at once (the latest)
_PROGRESS_LINES = 5
#: a chat whose next edit was allowed this long ago is forgotten by the pacer
_PACER_FORGET_S = 60.0
#: edits of one chat that may go out back to back
_BURST = 2


def stopped_text(partial: str) -> str:
    """What a streamed answer shows once /stop cut it: what was written, marked."""
    return f"{partial.rstrip()}\n\n⚡ Stopped." if partial.strip() else "⚡ Stopped."


class ChatPacer:
    """When each chat may see its next edit: one per ``interval`` on average, up to ``_BURST``
    back to back, none before a 429's wait is over.

    A cell-rate budget per chat (``_tat``: when its budget would be whole again) rather than a
    fixed gap, because the gap made a quick answer wait a whole interval between its only preview
    and its final form, holding the chat's lane meanwhile; the platforms' own limits allow such a
    pair (Discord: 5 edits per 5 s per channel; Slack's bursts; Telegram's 429 says when to retry).
    """

    def __init__(self, interval: float, burst: int = _BURST) -> None:
        self.interval = interval
        self.burst = burst
        self._tat: dict[tuple[str, str], float] = {}

    def next_at(self, chat: tuple[str, str]) -> float:
        return self._tat.get(chat, 0.0) - (self.burst - 1) * self.interval

    def note(self, chat: tuple[str, str], now: float) -> None:
        """An edit of ``chat`` goes out now."""
        self._tat[chat] = max(self._tat.get(chat, 0.0), now) + self.interval
        if len(self._tat) > 256:
            stale = [c for c, at in self._tat.items() if at < now - _PACER_FORGET_S]
            for c in stale:
                del self._tat[c]

    def hold(self, chat: tuple[str, str], until: float) -> None:
        """The platform said to wait until ``until`` (a 429): nothing before, then one at a time."""
        self._tat[chat] = max(self._tat.get(chat, 0.0), until + (self.burst - 1) * self.interval)


class StreamDriver:
    """Shows one turn's answer on ``stream`` while it is written; build one per turn."""

    def __init__(self, stream: ReplyStream, *, chat: tuple[str, str], settings: StreamingConfig, pacer: ChatPacer,
                 tool_progress: bool, clean: Callable[[str], str],
                 on_ids: Callable[[tuple[str, ...]], None] | None = None,
                 on_shown: Callable[[], object] | None = None) -> None:
        """``on_ids``: the stream's message ids changed (the ledger keeps them); ``on_shown``: the
        first text is visible (the typing indicator can stop)."""
        self._stream = stream
        self._chat = chat
        self._settings = settings
        self._pacer = pacer
        self._tool_progress = tool_progress
        self._clean = clean
        self._on_ids = on_ids
        self._on_shown = on_shown
        self._text = ""
        self._progress: list[str] = []
        self._first_at: float | None = None
        self._shown = ""
        #: the raw text and progress count that ``_shown`` was made from
        self._raw_shown: tuple[str, int] = ("", 0)
        self._ids: tuple[str, ...] = ()
        self._closing = False
        self._wake = asyncio.Event()
        #: the driver has shown everything and waits for more (so new text must wake it)
        self._waiting_for_text = True
        self._task: asyncio.Task[None] | None = None
        #: monotonic time of the last paced update (None: none yet)
        self._updated_at: float | None = None
        #: monotonic time of the first update that went out (None: nothing shown yet)
        self.first_shown_at: float | None = None

    # ---------------------------------------------------------------- AnswerListener

    def text(self, delta: str) -> None:
        if delta:
            self._text += delta
            self._started()

    def discard(self) -> None:
        self._text = ""
        if self._waiting_for_text:
            self._wake.set()

    def tool(self, name: str) -> None:
        if self._tool_progress:
            self._progress.append(f"⚙️ running {name}…")
            self._started()

    # -------------------------------------------------------------------- the driver

    @property
    def partial(self) -> str:
        """The answer as written so far (the text of the current model call)."""
        return self._text

    @property
    def shown(self) -> bool:
        """Something of the answer is visible, so ``finish`` (not a fresh send) must end it."""
        return self.first_shown_at is not None

    def _started(self) -> None:
        if self._first_at is None:
            self._first_at = time.monotonic()
        if self._task is None and not self._closing:
            self._task = asyncio.create_task(self._run(), name=f"stream:{self._chat[0]}:{self._chat[1]}")
        # Called for every token: the driver is woken only when that may change what it does next
        # (it waits for text, or its first update may become due by min_chars), never per token
        # while it sleeps until an update is due anyway.
        if self._waiting_for_text or (self.first_shown_at is None and len(self._text) >= self._settings.min_chars):
            self._wake.set()

    def _visible(self) -> str:
        if self._text.strip():
            return self._clean(self._text)
        return "\n".join(self._progress[-_PROGRESS_LINES:])

    def _due(self) -> float:
        """When the next update may go out (a throttled stream)."""
        due = self._pacer.next_at(self._chat)
        if self._updated_at is not None:  # one answer's previews keep the whole interval apart
            due = max(due, self._updated_at + self._settings.edit_interval)
        if self.first_shown_at is None and len(self._text) < self._settings.min_chars and self._first_at is not None:
            due = max(due, self._first_at + self._settings.first_delay)
        return due

    async def _run(self) -> None:
        while not self._closing:
            self._waiting_for_text = True
            if self._visible_changed():
                self._wake.set()
            await self._wake.wait()
            self._wake.clear()
            self._waiting_for_text = False
            if self._closing:
                return
            if self._stream.throttled and not await self._paced():
                return
            raw = (self._text, len(self._progress))
            text = self._visible()
            if not text.strip() or text == self._shown:
                self._raw_shown = raw
                continue
            now = time.monotonic()
            if self._stream.throttled:
                self._pacer.note(self._chat, now)
                self._updated_at = now
            try:
                await self._stream.update(text)
            except RateLimitedError as exc:
                log.info("stream.rate_limited", platform=self._chat[0], retry_after_s=exc.retry_after)
                self._pacer.hold(self._chat, time.monotonic() + exc.retry_after)
                self._wake.set()  # what was written goes out once the wait is over
                continue
            except Exception as exc:  # the final text still goes out, by finish or anew
                log.warning("stream.update_failed", platform=self._chat[0], error_type=type(exc).__name__,
                            error=str(exc)[:200])
                return
            self._shown = text
            self._raw_shown = raw
            if self.first_shown_at is None:
                self.first_shown_at = now
                if self._on_shown is not None:
                    self._on_shown()
            self._note_ids()

    def _visible_changed(self) -> bool:
        """Whether there is something to show that is not shown (cheap: no redaction)."""
        return bool(self._text.strip() or self._progress) and self._raw_shown != (self._text, len(self._progress))

    async def _paced(self) -> bool:
        """Wait until the next update is due (woken meanwhile only when min_chars may make the first
        one due sooner, or the driver closes); False when the driver is closing."""
        while True:
            now = time.monotonic()
            due = self._due()
            if due <= now:
                return not self._closing
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(due - now):
                    await self._wake.wait()
            if self._closing:
                return False

    def _note_ids(self) -> None:
        ids = self._stream.message_ids
        if ids != self._ids:
            self._ids = ids
            if self._on_ids is not None:
                self._on_ids(ids)

    async def close(self) -> None:
        """Stop updating; an update under way is let finish (a platform call cut in half may
        leave a message nobody can account for)."""
        self._closing = True
        self._wake.set()
        task, self._task = self._task, None
        if task is not None:
            await asyncio.shield(task)

    async def finish(self, message: OutboundMessage) -> SendResult:
        """End the stream with ``message``: its text is what stays visible. Raises what the
        stream's ``finish`` raises."""
        await self.close()
        if self._stream.throttled and self._stream.finish_edits:
            # The final edit counts against the chat's pace like any other, but waits no longer than
            # one interval for it: a longer 429 hold is the platform's to honour (or to refuse) in
            # ``finish``, by its own rules for a reply.
            wait = min(self._pacer.next_at(self._chat) - time.monotonic(), self._settings.edit_interval)
            if wait > 0:
                await asyncio.sleep(wait)
            self._pacer.note(self._chat, time.monotonic())
        return await self._stream.finish(message)
