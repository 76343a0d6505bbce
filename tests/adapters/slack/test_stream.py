"""The Slack reply stream: the real adapter (slack-bolt, slack-sdk) against ``FakeSlack``, driven
the way the gateway drives a ``ReplyStream`` (``update`` with the text so far, then ``finish``).

The adapter runs on its own, its router a test handler that accepts every message, so a test
controls exactly when a stream updates. Waits have timeouts; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import Disposition, InboundMessage, OutboundMessage, RateLimitedError, ReplyStream
from adapters.slack import SlackAdapter, SlackSettings, to_mrkdwn
from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN, FakeSlack

WAIT = 10.0
CHANNEL = "C0CHAN001"
DM = "D0DM0001"
FINAL = "Here is **the answer**: forty-two, and `why` it is so."
#: the text so far, as the gateway hands it to ``update``: each extends the one before
GROWING = ["Here is", "Here is **the ans", "Here is **the answer**: forty", "Here is **the answer**: forty-two, and"]


@asynccontextmanager
async def connected(fake: FakeSlack, **settings: Any) -> AsyncIterator[tuple[SlackAdapter, list[InboundMessage]]]:
    """A connected adapter whose router accepts every message (and keeps it, in order)."""
    config: dict[str, Any] = {"bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "api_base_url": fake.api_base_url,
                              "ping_interval": 0.5, "thinking_placeholder": False, **settings}
    adapter = SlackAdapter(SlackSettings(**config))
    got: list[InboundMessage] = []

    async def accept(message: InboundMessage) -> Disposition:
        got.append(message)
        return Disposition.ACCEPTED

    adapter.bind(accept)
    task = asyncio.create_task(adapter.connect())
    try:
        await asyncio.wait_for(adapter.ready.wait(), WAIT)
        yield adapter, got
    finally:
        await adapter.disconnect()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, WAIT)


async def asked(fake: FakeSlack, got: list[InboundMessage], text: str, *, chat: str = CHANNEL) -> OutboundMessage:
    """A user asks (a mention in a channel, a plain message in a DM); the answer's target."""
    await fake.user_says(text, chat=chat, mention=not chat.startswith("D"))
    await fake.wait_for(lambda: any(m.text == text for m in got), WAIT, what="the message at the router")
    message = next(m for m in got if m.text == text)
    return OutboundMessage("slack", message.chat_id, "", thread_id=message.thread_id, reply_to=message.message_id)


def opened(adapter: SlackAdapter, target: OutboundMessage) -> ReplyStream:
    stream = adapter.open_stream(target)
    assert stream is not None
    return stream


async def stream_all(stream: ReplyStream, target: OutboundMessage, final: str = FINAL) -> tuple[str, ...]:
    for text in GROWING:
        await stream.update(text)
    result = await stream.finish(OutboundMessage("slack", target.chat_id, final, thread_id=target.thread_id,
                                                 reply_to=target.reply_to))
    return result.message_ids


def methods(fake: FakeSlack) -> list[str]:
    return [c.method for c in fake.calls if c.method.startswith("chat.")]


# -- the stream methods --------------------------------------------------------------------------


async def test_a_channel_answer_streams_with_chat_streaming(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake) as (adapter, got):
        target = await asked(fake, got, "what is it?")
        [ts] = await stream_all(opened(adapter, target), target)
    message = fake.messages[(CHANNEL, ts)]
    # Markdown as written (Slack renders markdown_text itself), no stream left open, in the thread asked in.
    assert message["text"] == FINAL and not message["streaming"] and message["thread_ts"] == target.thread_id
    shown = fake.versions(CHANNEL, ts)
    assert len(shown) >= 3 and shown[0] == GROWING[0] and shown[-1] == FINAL
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(shown))
    assert methods(fake) == ["chat.startStream"] + ["chat.appendStream"] * 3 + ["chat.stopStream"]
    [start] = fake.calls_to("chat.startStream")
    # The recipient Slack requires outside DMs: who asked, in this workspace.
    assert start.params["recipient_user_id"] == fake.user and start.params["recipient_team_id"] == "T0TEAM001"
    # Each append carries only what is new.
    appended = [c.params["markdown_text"] for c in fake.calls_to("chat.appendStream")]
    assert "".join([GROWING[0], *appended]) == GROWING[-1]


async def test_text_taken_back_ends_the_stream_and_the_message_is_edited(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake) as (adapter, got):
        target = await asked(fake, got, "look it up")
        stream = opened(adapter, target)
        await stream.update("Let me check my memory first")
        # That model call asked for a tool: its text is dropped, and the answer is written anew.
        await stream.update("Here is")
        await stream.update("Here is **the answer**")
        result = await stream.finish(OutboundMessage("slack", CHANNEL, FINAL, thread_id=target.thread_id))
    [ts] = result.message_ids
    assert fake.messages[(CHANNEL, ts)]["text"] == FINAL
    assert fake.versions(CHANNEL, ts) == ["Let me check my memory first", "Let me check my memory first",
                                          "Here is", "Here is **the answer**", FINAL]
    assert methods(fake) == ["chat.startStream", "chat.stopStream"] + ["chat.update"] * 3
    assert all("markdown_text" in c.params for c in fake.calls_to("chat.update"))


async def test_a_long_answer_continues_in_a_new_streamed_message(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    paragraph = "A line of the answer that goes on for a while, word after word.\n"
    final = paragraph * 90  # past the 4000 characters of one message
    async with connected(fake) as (adapter, got):
        target = await asked(fake, got, "tell me everything")
        stream = opened(adapter, target)
        for n in (10, 40, 70):
            await stream.update(paragraph * n)
        result = await stream.finish(OutboundMessage("slack", CHANNEL, final, thread_id=target.thread_id))
        chunks = adapter.split(final)
    assert len(chunks) == 2 and len(result.message_ids) == 2
    assert [fake.messages[(CHANNEL, ts)]["text"] for ts in result.message_ids] == chunks
    assert not any(fake.messages[(CHANNEL, ts)]["streaming"] for ts in result.message_ids)
    assert len(fake.calls_to("chat.startStream")) == 2


# -- the fallback ---------------------------------------------------------------------------------


async def test_without_streaming_methods_the_answer_is_posted_and_edited() -> None:
    async with FakeSlack(streaming=False) as fake, connected(fake) as (adapter, got):
        target = await asked(fake, got, "first")
        [ts] = await stream_all(opened(adapter, target), target)
        # The workspace is remembered: the next answer does not ask for the streaming methods again.
        second = await asked(fake, got, "second")
        await stream_all(opened(adapter, second), second)
    assert fake.messages[(CHANNEL, ts)]["text"] == to_mrkdwn(FINAL)  # formatted as send() does
    shown = fake.versions(CHANNEL, ts)
    assert len(shown) >= 3 and shown[0] == to_mrkdwn(GROWING[0]) and shown[-1] == to_mrkdwn(FINAL)
    assert len(fake.calls_to("chat.startStream")) == 1
    assert methods(fake)[:6] == ["chat.startStream", "chat.postMessage"] + ["chat.update"] * 4


async def test_a_dm_is_answered_where_the_user_wrote_by_editing(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake) as (adapter, got):
        target = await asked(fake, got, "hello there", chat=DM)
        assert target.thread_id is None
        [ts] = await stream_all(opened(adapter, target), target)
    # A stream must be a thread reply; at the top of a DM the answer stays at the top.
    assert not fake.calls_to("chat.startStream")
    assert "thread_ts" not in fake.messages[(DM, ts)]
    assert fake.messages[(DM, ts)]["text"] == to_mrkdwn(FINAL)
    assert len(fake.versions(DM, ts)) >= 3


# -- the placeholder ------------------------------------------------------------------------------


async def placeholder_of(fake: FakeSlack, channel: str) -> str:
    def posted() -> str | None:
        return next((ts for (c, ts), m in fake.messages.items()
                     if c == channel and m.get("user") != fake.user and "thinking" in m["text"]), None)

    return str(await fake.wait_for(posted, WAIT, what="the thinking placeholder"))


async def test_the_placeholder_is_replaced_by_the_streamed_message(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake, thinking_placeholder=True, thinking_delay=0) as (adapter, got):
        target = await asked(fake, got, "slow one")
        placeholder = await placeholder_of(fake, CHANNEL)
        [ts] = await stream_all(opened(adapter, target), target)
        replies = await fake.wait_reply(CHANNEL, target.thread_id, text=FINAL, timeout=WAIT)
    assert ts != placeholder and (CHANNEL, placeholder) not in fake.messages
    assert [m["ts"] for m in replies] == [ts]  # one message in the thread: the answer
    # Deleted once the stream showed text, so the thread was never without one of them.
    assert methods(fake)[:3] == ["chat.postMessage", "chat.startStream", "chat.delete"]


async def test_the_placeholder_is_the_first_message_of_an_edited_stream() -> None:
    async with FakeSlack(streaming=False) as fake, \
            connected(fake, thinking_placeholder=True, thinking_delay=0) as (adapter, got):
        target = await asked(fake, got, "slow one")
        placeholder = await placeholder_of(fake, CHANNEL)
        ids = await stream_all(opened(adapter, target), target)
        replies = await fake.wait_reply(CHANNEL, target.thread_id, text=to_mrkdwn(FINAL), timeout=WAIT)
    assert ids == (placeholder,) and [m["ts"] for m in replies] == [placeholder]
    assert fake.versions(CHANNEL, placeholder)[0] == "_…thinking_"
    assert len(fake.versions(CHANNEL, placeholder)) >= 4


# -- rate limits ----------------------------------------------------------------------------------


async def test_a_429_on_an_append_is_a_rate_limit_and_finish_still_lands(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake) as (adapter, got):
        target = await asked(fake, got, "go")
        stream = opened(adapter, target)
        await stream.update(GROWING[0])
        fake.fail_next("chat.appendStream", 429, headers={"Retry-After": "7"})
        with pytest.raises(RateLimitedError) as limited:
            await stream.update(GROWING[1])
        assert limited.value.retry_after == 7.0
        assert len(fake.calls_to("chat.appendStream")) == 1  # not retried behind the gateway's back
        await stream.update(GROWING[2])
        fake.fail_next("chat.stopStream", 429, headers={"Retry-After": "0"})
        result = await stream.finish(OutboundMessage("slack", CHANNEL, FINAL, thread_id=target.thread_id))
    [ts] = result.message_ids
    assert fake.messages[(CHANNEL, ts)]["text"] == FINAL and not fake.messages[(CHANNEL, ts)]["streaming"]
    assert [c.status for c in fake.calls_to("chat.stopStream")] == [429, 200]
    # Nothing shown twice: what was rate limited was sent again as part of the next append.
    assert fake.versions(CHANNEL, ts) == [GROWING[0], GROWING[2], FINAL]


async def test_a_429_on_an_edit_is_a_rate_limit_and_finish_still_lands() -> None:
    async with FakeSlack(streaming=False) as fake, connected(fake) as (adapter, got):
        target = await asked(fake, got, "go")
        stream = opened(adapter, target)
        await stream.update(GROWING[0])
        fake.fail_next("chat.update", 429, headers={"Retry-After": "3"})
        with pytest.raises(RateLimitedError) as limited:
            await stream.update(GROWING[1])
        assert limited.value.retry_after == 3.0
        assert len(fake.calls_to("chat.update")) == 1
        fake.fail_next("chat.update", 429, headers={"Retry-After": "0"})
        [ts] = (await stream.finish(OutboundMessage("slack", CHANNEL, FINAL, thread_id=target.thread_id))).message_ids
    assert fake.messages[(CHANNEL, ts)]["text"] == to_mrkdwn(FINAL)
    assert [c.status for c in fake.calls_to("chat.update")] == [429, 429, 200]


# -- after a restart, and switched off ------------------------------------------------------------


async def test_resume_stream_edits_the_messages_left_behind(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    api = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_base_url)
    async with connected(fake) as (adapter, got):
        target = await asked(fake, got, "cut off")
        # What a crash left: one ordinary message, and one still streaming (Slack ends those later).
        posted = (await api.chat_postMessage(channel=CHANNEL, text="Here is", thread_ts=target.thread_id))["ts"]
        streaming = (await api.chat_startStream(channel=CHANNEL, thread_ts=str(target.thread_id),
                                                markdown_text="Here is **the", recipient_user_id=fake.user,
                                                recipient_team_id="T0TEAM001"))["ts"]
        for ts in (posted, streaming):
            stream = adapter.resume_stream(target, (ts,))
            assert stream is not None and stream.message_ids == (ts,)
            result = await stream.finish(OutboundMessage("slack", CHANNEL, FINAL, thread_id=target.thread_id))
            assert result.message_ids == (ts,)
    assert fake.messages[(CHANNEL, posted)]["text"] == to_mrkdwn(FINAL)
    assert fake.messages[(CHANNEL, streaming)]["text"] == FINAL and not fake.messages[(CHANNEL, streaming)]["streaming"]
    assert len(fake.thread_replies(CHANNEL, target.thread_id)) == 2  # no new message


async def test_streaming_off_gives_no_stream(fake_slack: FakeSlack) -> None:
    async with connected(fake_slack, streaming=False) as (adapter, _):
        assert adapter.open_stream(OutboundMessage("slack", CHANNEL, "", thread_id="1.000001")) is None


async def test_a_channel_answer_whose_asker_is_unknown_is_posted_and_edited(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake) as (adapter, got):
        target = await asked(fake, got, "asked before a restart")
        # Slack requires a recipient outside DMs: an answer to a message this run did not see has none.
        unknown = OutboundMessage("slack", CHANNEL, "", thread_id=target.thread_id, reply_to="1600000000.000001")
        [ts] = await stream_all(opened(adapter, unknown), unknown)
    assert not fake.calls_to("chat.startStream")
    assert fake.messages[(CHANNEL, ts)]["text"] == to_mrkdwn(FINAL)
    assert fake.messages[(CHANNEL, ts)]["thread_ts"] == target.thread_id


async def test_an_empty_final_text_leaves_nothing_behind(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with connected(fake, thinking_placeholder=True, thinking_delay=0) as (adapter, got):
        target = await asked(fake, got, "never mind")
        placeholder = await placeholder_of(fake, CHANNEL)
        stream = opened(adapter, target)
        await stream.update(GROWING[0])
        result = await stream.finish(OutboundMessage("slack", CHANNEL, "  ", thread_id=target.thread_id))
    assert result.message_ids == () and stream.message_ids == ()
    assert fake.thread_replies(CHANNEL, target.thread_id) == []
    assert (CHANNEL, placeholder) not in fake.messages
