"""Telegram's reply streams (``open_stream`` / ``resume_stream``) through the real python-telegram-bot
against ``FakeTelegram``: drafts in private chats, a message edited in place elsewhere.

The tests drive a stream the way the gateway does (``update`` with the text so far, then ``finish``
once) and read what a person would see from the fake: its draft states, messages and calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from adapters._split import join_chunks, utf16_len
from adapters.base import AdapterError, OutboundMessage, RateLimitedError, ReplyStream
from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.emulators.fake_telegram import FakeTelegram

PARSE_ERROR = "Bad Request: can't parse entities: Character '.' is reserved and must be escaped"


def make_adapter(fake: FakeTelegram, **settings: Any) -> TelegramAdapter:
    return TelegramAdapter(TelegramSettings(token=fake.token, base_url=fake.base_url,
                                            base_file_url=fake.base_file_url, **settings))


@pytest.fixture
async def adapter(fake_telegram: FakeTelegram) -> AsyncIterator[TelegramAdapter]:
    a = make_adapter(fake_telegram)
    yield a
    await a.disconnect()


def target(chat_id: int, *, reply_to: int | None = None, thread_id: int | None = None) -> OutboundMessage:
    return OutboundMessage(platform="telegram", chat_id=str(chat_id), text="",
                           reply_to=None if reply_to is None else str(reply_to),
                           thread_id=None if thread_id is None else str(thread_id))


def answer(out: OutboundMessage, text: str) -> OutboundMessage:
    return OutboundMessage(platform=out.platform, chat_id=out.chat_id, text=text, reply_to=out.reply_to,
                           thread_id=out.thread_id)


def opened(adapter: TelegramAdapter, out: OutboundMessage) -> ReplyStream:
    stream = adapter.open_stream(out)
    assert stream is not None
    return stream


def bot_messages(fake: FakeTelegram, chat: int) -> list[dict[str, Any]]:
    return [m for m in fake.history(chat) if m["from"]["id"] == fake.bot_id]


def calls(fake: FakeTelegram, method: str) -> list[tuple[int | None, Any]]:
    """(status, text) of every call of ``method``."""
    return [(c.status, c.params.get("text")) for c in fake.calls_to(method)]


WORDS = "The quick brown fox jumps over the lazy dog. " * 200  # 9000 characters
MARKED = "The **quick** brown fox jumps over the lazy dog. " * 200


# -- private chats: drafts --------------------------------------------------------------------------


async def test_a_dm_stream_shows_drafts_and_ends_with_exactly_the_answer(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    chat = fake_telegram.user["id"]
    stream = opened(adapter, target(chat))
    for text in ("Hello", "Hello, this", "Hello, this is", "Hello, this is **the** answer"):
        await stream.update(text)
    assert stream.message_ids == ()  # a draft is no message
    assert fake_telegram.sent == []
    states = fake_telegram.draft_states(chat)
    assert states == ["Hello", "Hello, this", "Hello, this is", "Hello, this is **the** answer"]
    assert len({d["draft_id"] for d in fake_telegram.drafts}) == 1  # one draft, animated

    result = await stream.finish(answer(target(chat), "Hello, this is **the** answer."))
    [message] = bot_messages(fake_telegram, chat)
    assert message["text"] == "Hello, this is the answer."
    assert message["entities"] == [{"type": "bold", "offset": 15, "length": 3}]
    assert [m["parse_mode"] for m in fake_telegram.sent] == ["MarkdownV2"]
    assert result.message_ids == stream.message_ids == (str(message["message_id"]),)
    assert fake_telegram.draft(chat) is None  # the message took the draft's place


async def test_a_dm_draft_shows_the_part_being_written_once_past_one_message(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    chat = fake_telegram.user["id"]
    stream = opened(adapter, target(chat))
    await stream.update(WORDS[:3000])
    await stream.update(WORDS)
    await stream.update(WORDS + "And more")
    first, second, third = fake_telegram.draft_states(chat)
    assert first == WORDS[:3000]
    assert utf16_len(second) <= 4096 and WORDS.rstrip().endswith(second.rstrip())
    assert third.endswith("And more") and third != second

    await stream.finish(answer(target(chat), WORDS + "And more"))
    chunks = adapter.split(WORDS + "And more")
    assert len(chunks) == 3
    assert [m["text"] for m in bot_messages(fake_telegram, chat)] == chunks
    assert chunks[-1] == third  # the draft was the answer's last message as it grew
    assert len(stream.message_ids) == 3


async def test_a_bot_refused_drafts_streams_by_editing_in_private_chats(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    chat = fake_telegram.user["id"]
    fake_telegram.fail_next("sendMessageDraft", 400, "Bad Request: TEXTDRAFT_PEER_INVALID")
    stream = opened(adapter, target(chat))
    await stream.update("First words")
    await stream.update("First words and more")
    [message] = bot_messages(fake_telegram, chat)
    assert message["text"] == "First words and more"
    assert stream.message_ids == (str(message["message_id"]),)
    await stream.finish(answer(target(chat), "First words and more."))
    assert fake_telegram.message(chat, message["message_id"])["text"] == "First words and more."

    # Known from now on: the next answer does not ask for a draft at all.
    drafts = len(fake_telegram.calls_to("sendMessageDraft"))
    again = opened(adapter, target(chat))
    await again.update("Second")
    assert len(fake_telegram.calls_to("sendMessageDraft")) == drafts
    assert bot_messages(fake_telegram, chat)[-1]["text"] == "Second"


# -- groups, channels, topics: a message edited in place ---------------------------------------------


async def test_a_group_stream_posts_then_edits_and_ends_in_markdown_v2(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group = fake_telegram.group()["id"]
    question = (await fake_telegram.user_says("tell me", chat=group, mention=True))["message"]["message_id"]
    out = target(group, reply_to=question)
    stream = opened(adapter, out)
    for text in ("It is", "It is **very", "It is **very** simple", "It is **very** simple"):
        await stream.update(text)
    [message] = bot_messages(fake_telegram, group)
    mid = message["message_id"]
    assert stream.message_ids == (str(mid),)
    assert message["reply_to_message"]["message_id"] == question  # the answer quotes the question
    assert calls(fake_telegram, "sendMessage") == [(200, "It is")]
    # Live text is plain (a half-written ``**`` must not break an edit); an unchanged text costs no call.
    assert calls(fake_telegram, "editMessageText") == [(200, "It is **very"), (200, "It is **very** simple")]
    assert all(m["parse_mode"] is None for m in fake_telegram.sent)

    result = await stream.finish(answer(out, "It is **very** simple."))
    assert result.message_ids == (str(mid),)
    final = fake_telegram.sent[-1]
    assert final["method"] == "editMessageText" and final["parse_mode"] == "MarkdownV2"
    shown = fake_telegram.message(group, mid)
    assert shown["text"] == "It is very simple." and shown["entities"] == [{"type": "bold", "offset": 6, "length": 4}]
    assert len(bot_messages(fake_telegram, group)) == 1


async def test_a_group_stream_continues_in_a_new_message_past_4096_units(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group = fake_telegram.group()["id"]
    out = target(group)
    stream = opened(adapter, out)
    for end in (2000, 4000, 6000, len(MARKED)):
        await stream.update(MARKED[:end])
    live = bot_messages(fake_telegram, group)
    assert len(live) == 3 and stream.message_ids == tuple(str(m["message_id"]) for m in live)
    assert join_chunks([m["text"] for m in live]) == MARKED  # plain while live

    await stream.finish(answer(out, MARKED))
    final = bot_messages(fake_telegram, group)
    assert [m["message_id"] for m in final] == [m["message_id"] for m in live]  # the same messages, edited
    assert "".join(m["text"] for m in final) == MARKED.replace("**", "")
    assert all(e["type"] == "bold" for m in final for e in m["entities"])
    # Each was edited once more, as MarkdownV2 whose escaped text still fits Telegram's limit.
    last_edits = [m for m in fake_telegram.sent if m["method"] == "editMessageText"][-3:]
    assert sorted(m["message_id"] for m in last_edits) == [m["message_id"] for m in live]
    assert [m["parse_mode"] for m in last_edits] == ["MarkdownV2"] * 3
    assert all("\\." in m["text"] and utf16_len(m["text"]) <= 4096 for m in last_edits)


async def test_the_final_edit_falls_back_to_plain_text_when_telegram_refuses_the_markup(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group = fake_telegram.group()["id"]
    out = target(group)
    stream = opened(adapter, out)
    await stream.update("Version 1")
    fake_telegram.fail_next("editMessageText", 400, PARSE_ERROR)
    await stream.finish(answer(out, "Version 1.2 is **out**."))
    assert [(s, p.get("parse_mode")) for s, p in
            ((c.status, c.params) for c in fake_telegram.calls_to("editMessageText"))] == [
        (400, "MarkdownV2"), (200, None)]
    [message] = bot_messages(fake_telegram, group)
    assert message["text"] == "Version 1.2 is **out**." and "entities" not in message


async def test_an_edit_that_changes_nothing_is_not_an_error(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group = fake_telegram.group()["id"]
    out = target(group)
    stream = opened(adapter, out)
    await stream.update("Plain words")
    result = await stream.finish(answer(out, "Plain words"))  # its MarkdownV2 renders the same
    assert [c.status for c in fake_telegram.calls_to("editMessageText")] == [400]
    assert "not modified" in fake_telegram.calls_to("editMessageText")[0].response["description"]
    assert result.message_ids == stream.message_ids and len(result.message_ids) == 1


async def test_a_final_text_needing_fewer_messages_removes_the_rest_and_a_blank_one_removes_all(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group = fake_telegram.group()["id"]
    out = target(group)
    stream = opened(adapter, out)
    await stream.update(WORDS)  # three messages
    first, second, third = (int(i) for i in stream.message_ids)
    result = await stream.finish(answer(out, "Shorter after all."))
    assert result.message_ids == (str(first),)
    assert fake_telegram.deleted == [(group, third), (group, second)]
    assert [m["text"] for m in bot_messages(fake_telegram, group)] == ["Shorter after all."]

    blank = opened(adapter, out)
    await blank.update("Thinking out loud")
    assert (await blank.finish(answer(out, "  "))).message_ids == ()  # as ``send`` sends nothing for it
    assert [m["text"] for m in bot_messages(fake_telegram, group)] == ["Shorter after all."]


async def test_a_stream_in_a_forum_topic_stays_in_the_topic(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    forum = fake_telegram.forum()["id"]
    topic = fake_telegram.create_topic(forum, "Plans")
    out = target(forum, thread_id=topic)
    stream = opened(adapter, out)
    await stream.update("In the topic")
    await stream.finish(answer(out, "In the topic, finished"))
    [message] = [m for m in bot_messages(fake_telegram, forum) if "text" in m]
    assert message["message_thread_id"] == topic and message["text"] == "In the topic, finished"
    assert fake_telegram.calls_to("sendMessageDraft") == []


# -- rate limits --------------------------------------------------------------------------------------


async def test_a_429_on_an_edit_is_rate_limited_error_and_the_chat_waits(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group = fake_telegram.group()["id"]
    stream = opened(adapter, target(group))
    await stream.update("one")
    fake_telegram.rate_limit_chat(group, retry_after=30)
    with pytest.raises(RateLimitedError) as info:
        await stream.update("one two")
    assert info.value.retry_after == 30
    # Within the wait nothing more is asked of Telegram in that chat: the next update fails at once.
    with pytest.raises(RateLimitedError) as info:
        await stream.update("one two three")
    assert 0 < info.value.retry_after <= 30
    assert [c.status for c in fake_telegram.calls_to("editMessageText")] == [429]
    assert bot_messages(fake_telegram, group)[0]["text"] == "one"


async def test_finish_waits_out_429s_and_lands_the_final_text(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group = fake_telegram.group()["id"]
    out = target(group)
    stream = opened(adapter, out)
    await stream.update("almost")
    fake_telegram.rate_limit_chat(group, retry_after=0.2, times=2)
    await stream.finish(answer(out, "almost done"))
    assert [c.status for c in fake_telegram.calls_to("editMessageText")] == [429, 429, 200]
    assert [m["text"] for m in bot_messages(fake_telegram, group)] == ["almost done"]


async def test_a_429_on_a_draft_is_rate_limited_error(fake_telegram: FakeTelegram, adapter: TelegramAdapter) -> None:
    chat = fake_telegram.user["id"]
    fake_telegram.rate_limit_chat(chat, retry_after=2)
    stream = opened(adapter, target(chat))
    with pytest.raises(RateLimitedError) as info:
        await stream.update("Hi")
    assert info.value.retry_after == 2
    assert fake_telegram.draft_states(chat) == []


async def test_a_stream_keeps_to_the_chat_s_flood_wait_and_lock_shared_with_sends(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group, other = fake_telegram.group()["id"], fake_telegram.group("Other")["id"]
    # A 429 on the typing indicator puts the chat in a flood wait: the stream asks nothing of it.
    fake_telegram.rate_limit_next("sendChatAction", retry_after=30)
    await adapter.send_typing(str(other))
    with pytest.raises(RateLimitedError):
        await opened(adapter, target(other)).update("words")
    assert calls(fake_telegram, "sendMessage") == []

    # A reply waiting out a 429 holds the chat: the stream's first message comes after it, not inside.
    fake_telegram.rate_limit_next("sendMessage", retry_after=0.3)
    reply = asyncio.create_task(adapter.send(answer(target(group), "an earlier reply")))
    await fake_telegram.wait_calls("sendMessage", match=lambda c: c.status == 429)
    await opened(adapter, target(group)).update("the streamed answer")
    await reply
    assert calls(fake_telegram, "sendMessage") == [
        (429, "an earlier reply"), (200, "an earlier reply"), (200, "the streamed answer")]
    assert [m["text"] for m in bot_messages(fake_telegram, group)] == ["an earlier reply", "the streamed answer"]


# -- recovery and switching off -----------------------------------------------------------------------


async def test_resume_stream_edits_the_messages_a_cut_off_stream_left(
    fake_telegram: FakeTelegram, adapter: TelegramAdapter
) -> None:
    group = fake_telegram.group()["id"]
    out = target(group)
    cut = opened(adapter, out)
    await cut.update("Half of the ans")
    ids = cut.message_ids

    restarted = make_adapter(fake_telegram)
    try:
        resumed = restarted.resume_stream(out, ids)
        assert resumed is not None and resumed.message_ids == ids
        result = await resumed.finish(answer(out, "Half of the answer, and the rest."))
        assert result.message_ids == ids
        assert calls(fake_telegram, "sendMessage") == [(200, "Half of the ans")]  # nothing sent anew
        assert [m["text"] for m in bot_messages(fake_telegram, group)] == ["Half of the answer, and the rest."]
        assert restarted.resume_stream(out, ()) is None  # a draft left no message: sent anew

        gone = restarted.resume_stream(out, ("999",))
        assert gone is not None
        with pytest.raises(AdapterError, match=r"(?i)message to edit not found"):
            await gone.finish(answer(out, "recovered"))
    finally:
        await restarted.disconnect()


async def test_streaming_false_gives_no_stream(fake_telegram: FakeTelegram) -> None:
    off = make_adapter(fake_telegram, streaming=False)
    assert off.open_stream(target(fake_telegram.user["id"])) is None
    assert off.open_stream(target(fake_telegram.group()["id"])) is None
    assert make_adapter(fake_telegram).open_stream(target(fake_telegram.user["id"])) is not None
