"""The stream driver's pacing, against a recording platform stream.

The platforms' own streams are tested against their emulators (tests/adapters/...) and the
whole path through a daemon in test_streaming_e2e.py; here the one thing under test is when
the driver calls ``update`` and ``finish``, so the stream only records what it was given.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from adapters.base import OutboundMessage, RateLimitedError, ReplyStream, SendResult
from gateway.config import StreamingConfig
from gateway.routing.streaming import ChatPacer, StreamDriver, stopped_text

CHAT = ("telegram", "1")


class Recording(ReplyStream):
    def __init__(self, *, throttled: bool = True, limited: list[float] | None = None) -> None:
        self.throttled = throttled
        self.updates: list[tuple[float, str]] = []
        self.finished: list[tuple[float, str]] = []
        self._limited = list(limited or [])

    @property
    def message_ids(self) -> tuple[str, ...]:
        return ("m1",) if self.updates else ()

    async def update(self, text: str) -> None:
        if self._limited:
            raise RateLimitedError("slow down", self._limited.pop(0))
        self.updates.append((time.monotonic(), text))

    async def finish(self, message: OutboundMessage) -> SendResult:
        self.finished.append((time.monotonic(), message.text))
        return SendResult(self.message_ids)


def driver(stream: ReplyStream, *, interval: float = 0.2, min_chars: int = 10, first_delay: float = 0.3,
           tool_progress: bool = False, pacer: ChatPacer | None = None,
           ids: list[tuple[str, ...]] | None = None) -> StreamDriver:
    settings = StreamingConfig(min_chars=min_chars, first_delay=first_delay, edit_interval=interval)
    return StreamDriver(stream, chat=CHAT, settings=settings, pacer=pacer or ChatPacer(interval),
                        tool_progress=tool_progress, clean=lambda t: t,
                        on_ids=ids.append if ids is not None else None)


def final(text: str) -> OutboundMessage:
    return OutboundMessage("telegram", "1", text)


async def write(d: StreamDriver, words: list[str], gap: float) -> None:
    for w in words:
        d.text(w)
        await asyncio.sleep(gap)


async def test_updates_grow_keep_the_pace_and_finish_with_the_final_text() -> None:
    stream = Recording()
    ids: list[tuple[str, ...]] = []
    d = driver(stream, ids=ids)
    words = [f"word{i} " for i in range(40)]
    await write(d, words, 0.02)
    await d.finish(final("".join(words)))
    texts = [t for _, t in stream.updates]
    assert len(texts) >= 3
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))  # only ever grows
    previews = [at for at, _ in stream.updates]
    assert all(b - a >= 0.2 - 1e-3 for a, b in itertools.pairwise(previews))
    calls = previews + [at for at, _ in stream.finished]  # the final edit may follow the last preview
    assert all(z - x >= 0.2 - 1e-3 for x, z in zip(calls, calls[2:], strict=False))
    assert [t for _, t in stream.finished] == ["".join(words)]
    assert ids == [("m1",)]  # the ledger hears of the message once, when it appeared


async def test_the_first_update_waits_for_min_chars_or_first_delay() -> None:
    stream = Recording()
    d = driver(stream, min_chars=10_000, first_delay=0.3, interval=0.2)
    started = time.monotonic()
    d.text("short")
    while not stream.updates:
        await asyncio.sleep(0.01)
    assert stream.updates[0][0] - started >= 0.3 - 1e-3
    enough = Recording()
    d2 = driver(enough, min_chars=5, first_delay=30.0)
    d2.text("long enough already")
    while not enough.updates:  # not held for first_delay: min_chars is reached
        await asyncio.sleep(0.01)
    await d.close()
    await d2.close()


async def test_a_429_holds_updates_and_nothing_written_meanwhile_is_lost() -> None:
    stream = Recording(limited=[0.5])
    d = driver(stream, min_chars=1, interval=0.2)
    await write(d, ["a" * 5, "b" * 5, "c" * 5], 0.05)
    while not stream.updates:
        await asyncio.sleep(0.01)
    _, first = stream.updates[0]
    assert first == "a" * 5 + "b" * 5 + "c" * 5  # the refused text went out with the next one
    await d.finish(final(first))
    assert stream.finished[0][1] == first


async def test_discard_drops_the_preamble_and_progress_shows_until_the_answer() -> None:
    stream = Recording()
    d = driver(stream, min_chars=1, first_delay=0, interval=0.2, tool_progress=True)
    d.text("let me look that up")
    await asyncio.sleep(0.3)
    d.discard()
    d.tool("memory")
    await asyncio.sleep(0.3)
    d.text("the answer")
    await asyncio.sleep(0.3)
    await d.finish(final("the answer"))
    texts = [t for _, t in stream.updates]
    assert texts[0] == "let me look that up"
    assert "⚙️ running memory…" in texts
    assert texts[-1] == "the answer"


async def test_an_unthrottled_stream_gets_text_at_once() -> None:
    sse = Recording(throttled=False)
    d = driver(sse, min_chars=10_000, first_delay=30.0, interval=5.0)
    d.text("x")
    while not sse.updates:
        await asyncio.sleep(0.01)
    assert sse.updates[0][1] == "x"
    await d.close()


async def test_two_answers_in_one_chat_share_its_pace() -> None:
    pacer = ChatPacer(0.25)
    a, b = Recording(), Recording()
    da, db = driver(a, pacer=pacer, min_chars=1, interval=0.25), driver(b, pacer=pacer, min_chars=1, interval=0.25)
    await asyncio.gather(write(da, ["a "] * 20, 0.03), write(db, ["b "] * 20, 0.03))
    await da.close()
    await db.close()
    calls = sorted(at for s in (a, b) for at, _ in s.updates)
    assert len(calls) >= 4
    # the chat's budget: two back to back at most, one per interval on average
    assert all(z - x >= 0.25 - 1e-3 for x, z in zip(calls, calls[2:], strict=False))
    assert calls[-1] - calls[0] >= (len(calls) - 2) * 0.25 - 1e-3
    for s in (a, b):  # and each answer's own previews a whole interval apart
        own = [at for at, _ in s.updates]
        assert all(y - x >= 0.25 - 1e-3 for x, y in itertools.pairwise(own))


def test_the_pacer_lets_two_edits_go_back_to_back_then_one_per_interval() -> None:
    pacer = ChatPacer(1.0)
    assert pacer.next_at(CHAT) <= 100.0
    pacer.note(CHAT, 100.0)
    assert pacer.next_at(CHAT) <= 100.0  # a second at once
    pacer.note(CHAT, 100.0)
    assert pacer.next_at(CHAT) == 101.0  # a third one interval later
    pacer.note(CHAT, 101.0)
    assert pacer.next_at(CHAT) == 102.0
    assert pacer.next_at(("telegram", "2")) <= 100.0  # another chat has its own budget
    pacer.note(CHAT, 110.0)  # a quiet spell fills the budget again, never beyond two
    assert pacer.next_at(CHAT) <= 110.0
    pacer.note(CHAT, 110.0)
    assert pacer.next_at(CHAT) == 111.0


def test_after_a_429_the_pacer_allows_nothing_before_its_end_then_one_at_a_time() -> None:
    pacer = ChatPacer(1.0)
    pacer.hold(CHAT, 105.0)
    assert pacer.next_at(CHAT) == 105.0
    pacer.note(CHAT, 105.0)
    assert pacer.next_at(CHAT) == 106.0


async def test_a_quick_answers_final_form_follows_its_only_preview_without_waiting_an_interval() -> None:
    stream = Recording()
    d = driver(stream, min_chars=1, first_delay=0, interval=30.0)
    d.text("the whole answer")
    while not stream.updates:
        await asyncio.sleep(0.01)
    # with a fixed gap, finish would sleep out the interval after the preview
    await asyncio.wait_for(d.finish(final("the whole answer")), 10)
    assert [t for _, t in stream.finished] == ["the whole answer"]


@pytest.mark.parametrize(("partial", "shown"), [("half an ans", "half an ans\n\n⚡ Stopped."), ("  ", "⚡ Stopped.")])
def test_a_stopped_answer_keeps_what_was_written(partial: str, shown: str) -> None:
    assert stopped_text(partial) == shown
