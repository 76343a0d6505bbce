"""The Discord reply stream: the real adapter and discord.py against ``FakeDiscord``, driven the way the
gateway drives it (``update`` with the text so far, then ``finish`` once). No timing is asserted: rate
limits are provoked by the fake's windows and injected 429s, and their waits are short or never slept.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from adapters._split import FENCE, join_chunks
from adapters.base import (
    AdapterError,
    Disposition,
    InboundMessage,
    OutboundMessage,
    RateLimitedError,
    ReplyStream,
)
from adapters.discord import DiscordAdapter, DiscordSettings
from tests.emulators.fake_discord import FakeDiscord

WAIT = 15.0


@asynccontextmanager
async def connected(fake: FakeDiscord, **settings: Any) -> AsyncIterator[tuple[DiscordAdapter, list[InboundMessage]]]:
    """The adapter connected to the fake; the messages it took in, in order."""
    adapter = DiscordAdapter(DiscordSettings(token=fake.token, base_url=fake.base_url, gateway_url=fake.gateway_url,
                                             guild_ready_timeout=0.05, identify_delay=0, **settings))
    inbound: list[InboundMessage] = []

    async def take(message: InboundMessage) -> Disposition:
        inbound.append(message)
        return Disposition.ACCEPTED

    adapter.bind(take)
    task = asyncio.create_task(adapter.connect())
    try:
        await asyncio.wait_for(adapter.ready.wait(), WAIT)
        yield adapter, inbound
    finally:
        await adapter.disconnect()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, WAIT)


async def asked(fake: FakeDiscord, inbound: list[InboundMessage], text: str, **where: Any) -> OutboundMessage:
    """A user's message, as the adapter took it in; the target of its answer (as the gateway makes it)."""
    await fake.user_says(text, **where)
    await fake.wait_for(lambda: inbound, WAIT, what="the adapter to take the message in")
    msg = inbound.pop(0)
    return OutboundMessage(msg.platform, msg.chat_id, "", msg.thread_id, msg.message_id)


def stream_of(adapter: DiscordAdapter, target: OutboundMessage) -> ReplyStream:
    stream = adapter.open_stream(target)
    assert stream is not None
    return stream


def answer(target: OutboundMessage, text: str) -> OutboundMessage:
    return OutboundMessage(target.platform, target.chat_id, text, target.thread_id, target.reply_to)


def content(fake: FakeDiscord, channel_id: str, message_id: str) -> str:
    [message] = [m for m in fake.channel_messages(channel_id) if m["id"] == message_id]
    text = message["content"]
    assert isinstance(text, str)
    return text


def balanced(chunk: str) -> bool:
    return sum(line.lstrip().startswith(FENCE) for line in chunk.splitlines()) % 2 == 0


async def test_a_stream_grows_by_edits_and_ends_with_exactly_the_final_text(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    fake.rate_buckets["edit_message"] = (50, 5.0)  # this test is about the edits, not their limit
    async with connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "tell me a story", chat="general", mention=True)
        stream = stream_of(adapter, target)
        words = "Once upon a time there was a gateway that streamed".split()
        for n in range(2, len(words) + 1, 2):
            await stream.update(" ".join(words[:n]))
        final = " ".join(words) + ", **the end**."
        result = await stream.finish(answer(target, final))
    [mid] = result.message_ids
    assert stream.message_ids == (mid,)
    [posted] = [s for s in fake.sent if s["method"] == "create_message"]
    assert posted["message_id"] == mid and posted["reply_to"] == target.reply_to and posted["chat_id"] == fake.general
    edits = [s["text"] for s in fake.sent if s["method"] == "edit_message" and s["message_id"] == mid]
    assert len(set(edits)) >= 3 and len(edits) == len(set(edits))  # each edit shows something new
    assert edits[-1] == final and content(fake, fake.general, mid) == final


async def test_past_2000_characters_it_continues_in_a_new_message_with_balanced_fences(
    fake_discord: FakeDiscord,
) -> None:
    fake = fake_discord
    fake.rate_buckets["edit_message"] = (50, 5.0)
    code = "```python\n" + "\n".join(f"print({i})  # line {i} of the listing" for i in range(120)) + "\n```\n"
    final = "Here is the program:\n\n" + code + "\nAnd that is all. " * 20
    assert len(final) > 4000
    async with connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "write code")  # a DM
        stream = stream_of(adapter, target)
        for size in (500, 1500, 2500, 3500):
            await stream.update(final[:size])
        result = await stream.finish(answer(target, final))
        assert result.message_ids == stream.message_ids and len(result.message_ids) >= 3
        chunks = [content(fake, target.chat_id, mid) for mid in result.message_ids]
    assert join_chunks(chunks) == final and all(len(c) <= 2000 and balanced(c) for c in chunks)
    assert any(FENCE + "python" in c.splitlines()[0] for c in chunks[1:])  # the block was reopened
    posts = [s for s in fake.sent if s["method"] == "create_message"]
    assert [p["message_id"] for p in posts] == list(result.message_ids)
    assert posts[0]["reply_to"] == target.reply_to and all(p["reply_to"] is None for p in posts[1:])


async def test_a_429_on_an_edit_surfaces_and_finish_waits_it_out(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "hello")
        stream = stream_of(adapter, target)
        fake.rate_limit_next("create_message", retry_after=0.2)
        with pytest.raises(RateLimitedError) as limited:
            await stream.update("Hel")
        assert stream.message_ids == () and not fake.sent  # nothing shown, nothing to edit later
        with pytest.raises(RateLimitedError):  # asked again too soon: refused without a request
            await stream.update("Hell")
        assert len(fake.calls_to("create_message")) == 1
        await asyncio.sleep(limited.value.retry_after)  # as the gateway does
        await stream.update("Hello")
        fake.rate_limit_next("edit_message", retry_after=0.25)
        with pytest.raises(RateLimitedError) as limited:
            await stream.update("Hello there")
        assert limited.value.retry_after == 0.25  # the body's retry_after, to the millisecond
        # discord.py neither slept nor sent the (by then stale) text again.
        assert [c.status for c in fake.calls_to("edit_message")] == [429]
        fake.rate_limit_next("edit_message", retry_after=0.05)
        result = await stream.finish(answer(target, "Hello there, friend."))
    [mid] = result.message_ids
    assert [c.status for c in fake.calls_to("edit_message")] == [429, 429, 200]
    assert content(fake, target.chat_id, mid) == "Hello there, friend."


async def test_a_used_up_window_surfaces_before_discord_py_would_sleep(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    fake.rate_buckets["edit_message"] = (3, 60.0)  # no test run outlasts the window
    async with connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "count")
        stream = stream_of(adapter, target)
        await stream.update("one")
        await stream.update("one two")
        await stream.update("one two three")
        # One edit is left: the request using it would make discord.py sleep until the reset.
        with pytest.raises(RateLimitedError) as limited:
            await stream.update("one two three four")
    assert 0 < limited.value.retry_after <= 60
    assert [c.status for c in fake.calls_to("edit_message")] == [200, 200]  # the last one was never sent


async def test_resume_stream_edits_the_messages_a_crash_left(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "long question", chat="general", mention=True)
        partial = await adapter.send(answer(target, "The answer so f"))
        stream = adapter.resume_stream(target, partial.message_ids)
        assert stream is not None and stream.message_ids == partial.message_ids
        result = await stream.finish(answer(target, "The answer so far, and the rest."))
        assert adapter.resume_stream(target, ()) is None
    assert result.message_ids == partial.message_ids
    assert len(fake.calls_to("create_message")) == 1
    assert content(fake, fake.general, partial.message_ids[0]) == "The answer so far, and the rest."


async def test_resume_over_an_unknown_message_is_an_adapter_error(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "question")
        stream = adapter.resume_stream(target, (str(fake.snowflake()),))
        assert stream is not None
        with pytest.raises(AdapterError, match="gone") as failed:
            await stream.finish(answer(target, "recovered text"))
    assert not isinstance(failed.value, RateLimitedError)
    assert [c.status for c in fake.calls_to("edit_message")] == [404]


async def test_an_auto_thread_answer_streams_into_its_new_thread(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with connected(fake, auto_thread=True) as (adapter, inbound):
        target = await asked(fake, inbound, "Plan a trip", chat="general", mention=True)
        assert target.thread_id == target.reply_to  # the thread takes the question's id
        stream = stream_of(adapter, target)
        await stream.update("Day one: ")
        result = await stream.finish(answer(target, "Day one: Rome."))
    [thread] = fake.threads
    assert thread["id"] == target.thread_id
    [mid] = result.message_ids
    assert content(fake, thread["id"], mid) == "Day one: Rome."


def test_streaming_off_gives_no_stream() -> None:
    adapter = DiscordAdapter(DiscordSettings(token="t", streaming=False))
    target = OutboundMessage("discord", "1", "", None, "2")
    assert adapter.open_stream(target) is None
    assert DiscordAdapter(DiscordSettings(token="t")).open_stream(target) is not None
