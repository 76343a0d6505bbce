"""The fake Telegram Bot API, proven with the real python-telegram-bot (no internet)."""

from __future__ import annotations

import asyncio
import datetime as dtm
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from telegram import Bot, ReplyParameters, Update
from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, NetworkError, RetryAfter
from telegram.ext import ApplicationBuilder, CommandHandler, ContextTypes, MessageHandler, filters

from tests.emulators import (
    CONFLICT_POLLING,
    SECRET_HEADER,
    EntityParseError,
    FakeTelegram,
    parse_html,
    parse_markdown_v2,
    utf16_len,
)

# The fixtures come from the plugin (harmless once tests/conftest.py lists it too).
pytest_plugins = ["tests.emulators.plugin"]


def make_bot(fake: FakeTelegram, token: str | None = None) -> Bot:
    return Bot(token or fake.token, base_url=fake.base_url, base_file_url=fake.base_file_url)


@pytest.fixture
async def bot(fake_telegram: FakeTelegram) -> AsyncIterator[Bot]:
    async with make_bot(fake_telegram) as b:
        yield b


class Receiver:
    """A tiny aiohttp webhook endpoint that records what the fake POSTs."""

    def __init__(self, statuses: list[int] | None = None) -> None:
        self.statuses = list(statuses or [])
        self.requests: list[tuple[dict[str, str], Any]] = []
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append((dict(request.headers), await request.json()))
        return web.Response(status=self.statuses.pop(0) if self.statuses else 200)

    async def __aenter__(self) -> Receiver:
        app = web.Application()
        app.router.add_post("/hook", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/hook"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


# ------------------------------------------------------------------------------------- basics


async def test_get_me_and_calls_recorded(fake_telegram: FakeTelegram, bot: Bot) -> None:
    me = await bot.get_me()
    assert me.id == fake_telegram.bot_id == 123456
    assert me.username == fake_telegram.bot_username and me.is_bot
    [call] = fake_telegram.calls_to("getMe")[-1:]
    assert call.status == 200 and call.time > 0


async def test_wrong_token_is_invalid_token(fake_telegram: FakeTelegram) -> None:
    with pytest.raises(InvalidToken):
        await make_bot(fake_telegram, "123456:WRONG-TOKEN").get_me()
    assert fake_telegram.calls[-1].status == 401


async def test_private_message_reaches_get_updates(fake_telegram: FakeTelegram, bot: Bot) -> None:
    sent = await fake_telegram.user_says("hello 👋")
    [update] = await bot.get_updates(timeout=1)
    msg = update.message
    assert update.update_id == sent["update_id"]
    assert msg.text == "hello 👋" and msg.chat.type == "private"
    assert msg.chat.id == msg.from_user.id == fake_telegram.user["id"]
    assert msg.from_user.first_name == "Alice" and not msg.from_user.is_bot
    assert msg.message_thread_id is None and msg.reply_to_message is None


async def test_group_command_and_mention_entities(fake_telegram: FakeTelegram, bot: Bot) -> None:
    group = fake_telegram.group("Team")
    bob = fake_telegram.add_user("Bob", username="bob")
    await fake_telegram.user_says("/help@hermes_test_bot now", chat=group, user=bob)
    await fake_telegram.user_says("what is up?", chat=group, user=bob, mention=True)
    first, second = await bot.get_updates(timeout=1)
    assert first.message.chat.type == "group" and first.message.chat.title == "Team"
    assert first.message.from_user.username == "bob"
    [command] = first.message.entities
    assert command.type == "bot_command" and (command.offset, command.length) == (0, 21)
    assert second.message.text == "@hermes_test_bot what is up?"
    assert [e.type for e in second.message.entities] == ["mention"]
    assert second.message.parse_entities() == {second.message.entities[0]: "@hermes_test_bot"}


async def test_forum_topic_thread_ids(fake_telegram: FakeTelegram, bot: Bot) -> None:
    forum = fake_telegram.forum("HQ")
    topic = await bot.create_forum_topic(forum["id"], "handoff")
    assert fake_telegram.topics(forum) == {topic.message_thread_id: "handoff"}
    await fake_telegram.user_says("in the topic", chat=forum, thread=topic.message_thread_id)
    [update] = await bot.get_updates(timeout=1)
    msg = update.message
    assert msg.chat.is_forum and msg.chat.type == "supergroup"
    assert msg.message_thread_id == topic.message_thread_id and msg.is_topic_message
    # Like Telegram: a plain message in a topic "replies" to the topic's creation service message.
    assert msg.reply_to_message.forum_topic_created.name == "handoff"
    assert msg.reply_to_message.from_user.id == fake_telegram.bot_id

    await bot.send_message(forum["id"], "answer", message_thread_id=topic.message_thread_id)
    [sent] = await fake_telegram.wait_sent(1)
    assert sent["thread_id"] == topic.message_thread_id
    with pytest.raises(BadRequest, match=r"(?i)message thread not found"):
        await bot.send_message(forum["id"], "x", message_thread_id=999)
    with pytest.raises(BadRequest, match=r"(?i)not a forum"):
        await bot.create_forum_topic(fake_telegram.supergroup()["id"], "nope")


async def test_thread_in_non_forum_supergroup(fake_telegram: FakeTelegram, bot: Bot) -> None:
    group = fake_telegram.supergroup("Plain")
    await fake_telegram.user_says("reply thread", chat=group, thread=7)
    [update] = await bot.get_updates(timeout=1)
    assert update.message.message_thread_id == 7
    assert not update.message.is_topic_message and not update.message.chat.is_forum


async def test_reply_to_bot(fake_telegram: FakeTelegram, bot: Bot) -> None:
    group = fake_telegram.group()
    mine = await bot.send_message(group["id"], "I said this")
    await fake_telegram.user_says("and I reply", chat=group, reply_to_bot=True)
    [update] = await bot.get_updates(timeout=1)
    assert update.message.reply_to_message.message_id == mine.message_id
    assert update.message.reply_to_message.from_user.id == fake_telegram.bot_id


async def test_offset_acknowledges_and_redeliver(fake_telegram: FakeTelegram, bot: Bot) -> None:
    await fake_telegram.user_says("one")
    await fake_telegram.user_says("two")
    assert [u.message.text for u in await bot.get_updates(timeout=0)] == ["one", "two"]
    again = await bot.get_updates(timeout=0)  # no offset: nothing acknowledged yet
    assert len(again) == 2
    first_id = again[0].update_id
    assert [u.message.text for u in await bot.get_updates(offset=first_id + 1, timeout=0)] == ["two"]
    assert await bot.get_updates(offset=first_id + 2, timeout=0) == ()
    assert fake_telegram.updates == [] and fake_telegram.acked_offset == first_id + 2

    await fake_telegram.redeliver(first_id)
    [dup] = await bot.get_updates(offset=first_id + 2, timeout=0)
    assert dup.update_id == first_id and dup.message.text == "one"


async def test_long_poll_parks_and_wakes(fake_telegram: FakeTelegram, bot: Bot) -> None:
    assert not fake_telegram.connected()
    task = asyncio.create_task(bot.get_updates(timeout=5))
    await fake_telegram.wait_for(lambda: fake_telegram.parked_polls == 1)
    assert fake_telegram.connected()
    await fake_telegram.user_says("wake up")
    [update] = await asyncio.wait_for(task, 2)
    assert update.message.text == "wake up"
    assert fake_telegram.connected()  # answered within the poll window


async def test_empty_poll_times_out_with_empty_list(fake_telegram: FakeTelegram, bot: Bot) -> None:
    assert await bot.get_updates(timeout=0.2) == ()


# ------------------------------------------------------------------------------------ outbound


async def test_send_message_round_trip(fake_telegram: FakeTelegram, bot: Bot) -> None:
    await fake_telegram.user_says("hi")
    [update] = await bot.get_updates(timeout=1)
    reply = await bot.send_message(
        update.message.chat_id, "123", reply_parameters=ReplyParameters(update.message.message_id)
    )
    assert reply.text == "123" and reply.from_user.id == fake_telegram.bot_id
    assert reply.reply_to_message.message_id == update.message.message_id
    [sent] = await fake_telegram.wait_sent(1)
    # Form-encoded "123" stays a string (pitfall 1); ids come back as ints.
    assert sent["text"] == "123" and isinstance(sent["text"], str)
    assert sent["chat_id"] == update.message.chat_id and sent["message_id"] == reply.message_id
    assert sent["reply_to"] == update.message.message_id and sent["method"] == "sendMessage"
    assert fake_telegram.history(update.message.chat_id)[-1]["text"] == "123"


async def test_wait_sent_timeout_says_what_was_sent(fake_telegram: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(fake_telegram.user["id"], "only this")
    with pytest.raises(AssertionError, match="only this"):
        await fake_telegram.wait_sent(2, timeout=0.1)
    assert len(await fake_telegram.wait_sent(1, match=lambda m: m["text"] == "only this")) == 1


async def test_markdown_v2_valid_and_invalid(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.user["id"]
    ok = await bot.send_message(
        chat, r"*bold* _it_ `a.b` \- 1\.5 [link](http://x\.y/a\)b)", parse_mode="MarkdownV2"
    )
    assert ok.text == "bold it a.b - 1.5 link"
    assert [e.type for e in ok.entities] == ["bold", "italic", "code", "text_link"]
    assert ok.entities[3].url == "http://x.y/a)b"
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities: Character '\.' is reserved"):
        await bot.send_message(chat, "Hello.", parse_mode="MarkdownV2")
    with pytest.raises(BadRequest, match=r"(?i)Can't find end of Bold entity at byte offset 0"):
        await bot.send_message(chat, "*open", parse_mode="MarkdownV2")
    assert len(fake_telegram.sent) == 1  # rejected messages are not "sent"


async def test_too_long_counts_utf16(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.user["id"]
    await bot.send_message(chat, "x" * 4096)
    await bot.send_message(chat, "😀" * 2048)  # 4096 UTF-16 code units
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message(chat, "😀" * 2048 + "x")
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message(chat, "   ")


async def test_edit_chat_action_delete_commands_get_chat(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.user["id"]
    msg = await bot.send_message(chat, "draft")
    edited = await bot.edit_message_text("final", chat_id=chat, message_id=msg.message_id)
    assert edited.text == "final" and edited.edit_date is not None
    with pytest.raises(BadRequest, match=r"(?i)message is not modified"):
        await bot.edit_message_text("final", chat_id=chat, message_id=msg.message_id)
    assert [m["method"] for m in fake_telegram.sent] == ["sendMessage", "editMessageText"]
    assert fake_telegram.message(chat, msg.message_id)["text"] == "final"

    assert await bot.send_chat_action(chat, "typing")
    assert fake_telegram.calls_to("sendChatAction")[-1].params["action"] == "typing"
    assert await bot.delete_message(chat, msg.message_id)
    assert fake_telegram.deleted == [(chat, msg.message_id)]
    with pytest.raises(BadRequest, match=r"(?i)message to delete not found"):
        await bot.delete_message(chat, msg.message_id)

    assert await bot.set_my_commands([("help", "Show help"), ("title", "Name the chat")])
    assert [c.command for c in await bot.get_my_commands()] == ["help", "title"]
    full = await bot.get_chat(chat)
    assert full.first_name == "Alice" and full.type == "private"
    with pytest.raises(BadRequest, match=r"(?i)chat not found"):
        await bot.send_message(424242, "nobody")


# --------------------------------------------------------------------------------------- faults


# PTB 22 warns that RetryAfter.retry_after will become a timedelta.
@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
async def test_rate_limit_then_success(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake_telegram.rate_limit_next("sendMessage", retry_after=1)
    with pytest.raises(RetryAfter) as info:
        await bot.send_message(fake_telegram.user["id"], "first")
    assert info.value.retry_after in (1, dtm.timedelta(seconds=1))
    await bot.send_message(fake_telegram.user["id"], "second")
    assert [m["text"] for m in fake_telegram.sent] == ["second"]
    assert [c.status for c in fake_telegram.calls_to("sendMessage")] == [429, 200]


async def test_fail_next_description_and_block(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.user["id"]
    fake_telegram.fail_next("sendMessage", 403, "Forbidden: bot was blocked by the user")
    with pytest.raises(Forbidden, match=r"(?i)blocked"):
        await bot.send_message(chat, "x")
    fake_telegram.block_bot(chat)
    with pytest.raises(Forbidden):
        await bot.send_chat_action(chat, "typing")
    fake_telegram.unblock_bot(chat)
    fake_telegram.fail_next("getMe", 502)
    with pytest.raises(NetworkError):
        await bot.get_me()


async def test_conflicts(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake_telegram.conflict_next_poll(2)
    for _ in range(2):
        with pytest.raises(Conflict, match=r"(?i)terminated by other getUpdates request"):
            await bot.get_updates(timeout=0)
    assert await bot.get_updates(timeout=0) == ()
    fake_telegram.conflict_forever()
    for _ in range(3):
        with pytest.raises(Conflict):
            await bot.get_updates(timeout=0)
    fake_telegram.stop_conflicts()
    assert await bot.get_updates(timeout=0) == ()


async def test_second_poller_terminates_the_parked_one(fake_telegram: FakeTelegram, bot: Bot) -> None:
    parked = asyncio.create_task(bot.get_updates(timeout=5))
    await fake_telegram.wait_for(lambda: fake_telegram.parked_polls == 1)
    async with make_bot(fake_telegram) as other:
        assert await other.get_updates(timeout=0) == ()
    with pytest.raises(Conflict, match=r"(?i)terminated by other getUpdates"):
        await asyncio.wait_for(parked, 2)
    assert CONFLICT_POLLING.startswith("Conflict: terminated")


async def test_hang_polls_release_and_stop() -> None:
    fake = FakeTelegram()
    async with fake:
        local = make_bot(fake)
        async with local:
            fake.hang_polls()
            hung = asyncio.create_task(local.get_updates(timeout=0.2, read_timeout=30))
            await fake.wait_for(lambda: fake.parked_polls == 1)
            await fake.user_says("nobody hears this")
            await local.send_message(fake.user["id"], "sends still work")
            await asyncio.sleep(0.3)  # past the poll's own timeout: still no answer
            assert not hung.done()
            fake.release_polls()
            [update] = await asyncio.wait_for(hung, 2)
            assert update.message.text == "nobody hears this"

            fake.hang_polls()
            hung = asyncio.create_task(
                local.get_updates(offset=update.update_id + 1, timeout=0.2, read_timeout=30)
            )
            await fake.wait_for(lambda: fake.parked_polls == 1)
            await fake.stop()  # must release the parked request at once
            assert await asyncio.wait_for(hung, 2) == ()


# -------------------------------------------------------------------------------------- webhook


async def test_webhook_delivery_with_secret_and_retry(fake_telegram: FakeTelegram, bot: Bot) -> None:
    async with Receiver(statuses=[200, 500]) as receiver:
        assert await bot.set_webhook(receiver.url, secret_token="s3cret_TOKEN-1")
        assert fake_telegram.connected()
        info = await bot.get_webhook_info()
        assert info.url == receiver.url and info.pending_update_count == 0
        with pytest.raises(Conflict, match=r"(?i)webhook is active"):
            await bot.get_updates(timeout=0)

        first = await fake_telegram.user_says("via webhook")
        await fake_telegram.wait_for(lambda: len(receiver.requests) == 1)
        headers, body = receiver.requests[0]
        assert headers[SECRET_HEADER] == "s3cret_TOKEN-1"
        assert body == first and Update.de_json(body, bot).message.text == "via webhook"

        second = await fake_telegram.user_says("retried")  # the receiver answers 500 once
        await fake_telegram.wait_for(lambda: len(receiver.requests) == 3)
        attempts = [(d["update_id"], d["status"]) for d in fake_telegram.webhook_deliveries]
        assert attempts == [(first["update_id"], 200), (second["update_id"], 500), (second["update_id"], 200)]
        await fake_telegram.wait_for(lambda: fake_telegram.updates == [])

        assert await fake_telegram.deliver_to_webhook(first, secret=None) == 200
        assert SECRET_HEADER not in receiver.requests[-1][0]
        assert await bot.delete_webhook()
        assert await bot.get_updates(timeout=0) == ()


async def test_invalid_webhook_secret_is_refused(fake_telegram: FakeTelegram, bot: Bot) -> None:
    with pytest.raises(BadRequest, match=r"(?i)secret token"):
        await bot.set_webhook("http://127.0.0.1:9/hook", secret_token="not allowed!")


# ------------------------------------------------------------------------------------ raw wire


async def test_raw_http_json_query_and_unknown_method(fake_telegram: FakeTelegram) -> None:
    base = f"{fake_telegram.base_url}{fake_telegram.token}"
    chat = fake_telegram.user["id"]
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/sendMessage", json={"chat_id": str(chat), "text": "json body"}) as r:
            assert r.status == 200 and (await r.json())["result"]["chat"]["id"] == chat
        async with http.get(f"{base}/getme") as r:  # method names are case-insensitive
            assert (await r.json())["result"]["id"] == fake_telegram.bot_id
        form = aiohttp.FormData({"chat_id": str(chat), "action": "typing"})
        form.add_field("document", b"file bytes", filename="a.txt")
        async with http.post(f"{base}/sendChatAction", data=form) as r:
            assert r.status == 200
        assert fake_telegram.calls[-1].params["document"]["data"] == b"file bytes"
        async with http.post(f"{base}/noSuchMethod") as r:
            assert r.status == 404 and (await r.json())["description"] == "Not Found"
        async with http.post(f"{fake_telegram.base_url}not-a-token/getMe") as r:
            assert r.status == 404
    assert fake_telegram.calls_to("sendMessage")[0].params["chat_id"] == chat


async def test_raw_update_is_handed_out_once(fake_telegram: FakeTelegram, bot: Bot) -> None:
    await fake_telegram.raw_update({"update_id": "garbage", "message": {"text": "no chat"}})
    base = f"{fake_telegram.base_url}{fake_telegram.token}"
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{base}/getUpdates", data={"timeout": "0"}) as r:
            assert (await r.json())["result"] == [{"update_id": "garbage", "message": {"text": "no chat"}}]
    assert await bot.get_updates(timeout=0) == ()


# ------------------------------------------------------------------------------ full application


async def test_application_polling_round_trip(fake_telegram: FakeTelegram) -> None:
    async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await update.message.reply_text(f"echo: {update.message.text}")

    async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        await update.message.reply_text("started", do_quote=True)

    app = (
        ApplicationBuilder()
        .token(fake_telegram.token)
        .base_url(fake_telegram.base_url)
        .base_file_url(fake_telegram.base_file_url)
        .build()
    )
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    async with app:
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=10)
        await app.start()
        await fake_telegram.wait_connected()
        await fake_telegram.user_says("ping")
        cmd = await fake_telegram.user_says("/start")
        replies = await fake_telegram.wait_sent(2)
        assert sorted(m["text"] for m in replies) == ["echo: ping", "started"]
        started = next(m for m in replies if m["text"] == "started")
        assert started["reply_to"] == cmd["message"]["message_id"]
        await app.updater.stop()
        await app.stop()
    # PTB's last poll acknowledged everything it handled.
    assert fake_telegram.acked_offset == cmd["update_id"] + 1


# ------------------------------------------------------------------------------ entity parsing


@pytest.mark.parametrize(
    ("text", "plain", "types"),
    [
        (r"plain \_\*\[\]\(\)\~\`\>\#\+\-\=\|\{\}\.\!", "plain _*[]()~`>#+-=|{}.!", []),
        ("*b _i_ b*", "b i b", ["bold", "italic"]),
        ("__u__ ~s~ ||sp||", "u s sp", ["underline", "strikethrough", "spoiler"]),
        ("`co*de.` x", "co*de. x", ["code"]),
        ("```python\nprint(1)\n```", "print(1)\n", ["pre"]),
        ("```\na\\`b.\n```", "a`b.\n", ["pre"]),
        ("> quoted\n> more\nafter", " quoted\n more\nafter", ["blockquote"]),
        ("**> hidden\n> rest||\nout", " hidden\n rest\nout", ["expandable_blockquote"]),
        ("![👍](tg://emoji?id=5368324170671202286)", "👍", ["custom_emoji"]),
        ("emoji 😀 *x*", "emoji 😀 x", ["bold"]),
        ("** empty bold", " empty bold", []),
        ("a \\b c\\", "a b c\\", []),
    ],
)
def test_markdown_v2_parser_accepts(text: str, plain: str, types: list[str]) -> None:
    got, entities = parse_markdown_v2(text)
    assert got == plain
    assert [e["type"] for e in entities] == types


def test_markdown_v2_entity_offsets_are_utf16() -> None:
    _, [entity] = parse_markdown_v2("😀😀 *bold*")
    assert (entity["offset"], entity["length"]) == (5, 4)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("1.5", "Character '.' is reserved"),
        ("a-b", "Character '-' is reserved"),
        ("x > y", "Character '>' is reserved"),
        ("(x)", "Character '(' is reserved"),
        ("a|b", "Character '|' is reserved"),
        ("wow!", "Character '!' is reserved"),
        ("#tag", "Character '#' is reserved"),
        ("*bold", "Can't find end of Bold entity at byte offset 0"),
        ("ab _it", "Can't find end of Italic entity at byte offset 3"),
        ("é `code", "Can't find end of Code entity at byte offset 3"),
        ("```py\ncode", "Can't find end of PreCode entity at byte offset 0"),
        ("[text](http://x", "Can't find end of a URL at byte offset 7"),
        ("*b _i* x_", "Can't find end of Italic entity"),
    ],
)
def test_markdown_v2_parser_rejects(text: str, error: str) -> None:
    with pytest.raises(EntityParseError, match=error.replace("(", r"\(").replace("|", r"\|")):
        parse_markdown_v2(text)


def test_html_parser() -> None:
    assert parse_html("<b>bold</b> &lt;tag&gt; &amp; <a href='x'>l</a>") == ("bold <tag> & l", [])
    for bad, error in [
        ("<b>open", 'Can\'t find end tag corresponding to start tag "b"'),
        ("<x>y</x>", 'Unsupported start tag "x"'),
        ("<b><i>x</b></i>", 'Unmatched end tag at byte offset 7, expected "</i>", found "</b>"'),
    ]:
        with pytest.raises(EntityParseError, match=error):
            parse_html(bad)


def test_utf16_len() -> None:
    assert utf16_len("a😀é") == 4


async def test_payload_is_json_serialisable_and_schema_valid(fake_telegram: FakeTelegram, bot: Bot) -> None:
    forum = fake_telegram.forum()
    update = await fake_telegram.user_says("/topic x", chat=forum, thread=42, reply_to_bot=True)
    parsed = Update.de_json(json.loads(json.dumps(update)), bot)
    assert parsed.message.message_thread_id == 42 and parsed.message.reply_to_message.from_user.is_bot
    assert fake_telegram.topics(forum) == {42: "Topic 42"}


async def test_privacy_mode_withholds_unaddressed_group_messages() -> None:
    async with FakeTelegram(privacy_mode=True) as fake, make_bot(fake) as bot:
        group = fake.group()
        await fake.user_says("chatter", chat=group)
        await fake.user_says("hey bot", chat=group, mention=True)
        await fake.user_says("/help", chat=group)
        await fake.user_says("private chatter")
        assert [u.message.text for u in await bot.get_updates(timeout=0)] == [
            "@hermes_test_bot hey bot",
            "/help",
            "private chatter",
        ]
        assert [u["message"]["text"] for u in fake.withheld] == ["chatter"]
        assert not (await bot.get_me()).can_read_all_group_messages


async def test_connected_window_and_raw_update_ids() -> None:
    async with FakeTelegram(poll_window=0.1) as fake, make_bot(fake) as bot:
        await bot.get_updates(timeout=0)
        assert fake.connected()
        await fake.wait_for(lambda: not fake.connected(), timeout=2)
        fake.conflict_forever()
        with pytest.raises(Conflict):
            await bot.get_updates(timeout=0)
        assert not fake.connected()  # a 409 is not a connection
        fake.stop_conflicts()

        await fake.raw_update({"update_id": 50_000, "message": {"text": "x"}})
        later = await fake.user_says("after")
        assert later["update_id"] == 50_001


# ------------------------------------------------------------------------ streaming: drafts, edits


async def test_drafts_in_a_private_chat_are_recorded_and_replaced_by_the_message(
    fake_telegram: FakeTelegram, bot: Bot
) -> None:
    chat = fake_telegram.user["id"]
    for text in ("Hel", "Hello, wo", "Hello, world"):
        assert await bot.send_message_draft(chat, 7, text) is True
    assert fake_telegram.draft_states(chat) == ["Hel", "Hello, wo", "Hello, world"]
    assert fake_telegram.draft_states(chat, draft_id=8) == []
    shown = fake_telegram.draft(chat)
    assert shown is not None and shown["rendered"] == "Hello, world" and shown["draft_id"] == 7
    assert fake_telegram.sent == []  # a draft is no message

    await bot.send_message(chat, "Hello, world!")
    assert fake_telegram.draft(chat) is None
    assert [m["text"] for m in fake_telegram.history(chat)] == ["Hello, world!"]


async def test_draft_validation(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.user["id"]
    with pytest.raises(BadRequest, match=r"(?i)TEXTDRAFT_PEER_INVALID"):
        await bot.send_message_draft(fake_telegram.group()["id"], 1, "hi")
    with pytest.raises(BadRequest, match=r"(?i)draft_id must be non-zero"):
        await bot.send_message_draft(chat, 0, "hi")
    with pytest.raises(BadRequest, match=r"(?i)message text is empty"):
        await bot.send_message_draft(chat, 1, " ")
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.send_message_draft(chat, 1, "😀" * 2048 + "x")
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.send_message_draft(chat, 1, "a.b", parse_mode="MarkdownV2")
    assert await bot.send_message_draft(chat, 1, r"*bold*\.", parse_mode="MarkdownV2")
    assert fake_telegram.drafts[-1]["rendered"] == "bold."
    assert fake_telegram.drafts[-1]["entities"] == [{"type": "bold", "offset": 0, "length": 4}]
    assert len(fake_telegram.drafts) == 1  # refused drafts leave no state


async def test_edit_errors_as_telegram_words_them(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.group()["id"]
    msg = await bot.send_message(chat, "start")
    with pytest.raises(BadRequest, match=r"(?i)message to edit not found"):
        await bot.edit_message_text("x", chat_id=chat, message_id=msg.message_id + 100)
    with pytest.raises(BadRequest, match=r"(?i)message is too long"):
        await bot.edit_message_text("x" * 4097, chat_id=chat, message_id=msg.message_id)
    with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
        await bot.edit_message_text("1.5", chat_id=chat, message_id=msg.message_id, parse_mode="MarkdownV2")
    await bot.edit_message_text(r"*start*", chat_id=chat, message_id=msg.message_id, parse_mode="MarkdownV2")
    # Same text, other entities: modified; then exactly the same: not.
    with pytest.raises(BadRequest, match=r"(?i)message is not modified: specified new message content"):
        await bot.edit_message_text(
            r"*start*", chat_id=chat, message_id=msg.message_id, parse_mode="MarkdownV2"
        )
    assert fake_telegram.message(chat, msg.message_id)["entities"] == [
        {"type": "bold", "offset": 0, "length": 5}
    ]


async def test_rate_limit_chat_refuses_only_that_chat_and_those_methods(
    fake_telegram: FakeTelegram, bot: Bot
) -> None:
    group, other = fake_telegram.group()["id"], fake_telegram.group("Other")["id"]
    msg = await bot.send_message(group, "one")
    fake_telegram.rate_limit_chat(group, retry_after=3, times=2)
    for _ in range(2):
        with pytest.raises(RetryAfter) as info:
            await bot.edit_message_text("two", chat_id=group, message_id=msg.message_id)
        assert info.value.retry_after in (3, dtm.timedelta(seconds=3))
    refused = fake_telegram.calls_to("editMessageText")[-1]
    assert refused.status == 429 and refused.response == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 3",
        "parameters": {"retry_after": 3},
    }
    assert fake_telegram.message(group, msg.message_id)["text"] == "one"  # a 429 applies nothing
    await bot.send_message(group, "sends are not limited")
    other_msg = await bot.send_message(other, "x")
    await bot.edit_message_text("y", chat_id=other, message_id=other_msg.message_id)
    await bot.edit_message_text("two", chat_id=group, message_id=msg.message_id)  # the script ran out
    assert fake_telegram.message(group, msg.message_id)["text"] == "two"


async def test_chat_min_interval_answers_429_with_the_time_left(
    fake_telegram: FakeTelegram, bot: Bot
) -> None:
    chat = fake_telegram.user["id"]
    fake_telegram.chat_min_interval(chat, 30)
    await bot.send_message_draft(chat, 1, "a")
    with pytest.raises(RetryAfter) as info:
        await bot.send_message_draft(chat, 1, "ab")
    assert info.value.retry_after in (30, dtm.timedelta(seconds=30))  # whole seconds, like Telegram

    fake_telegram.chat_min_interval(chat, 30, whole_seconds=False)
    with pytest.raises(RetryAfter) as info:
        await bot.send_message_draft(chat, 1, "ab")
    left = info.value.retry_after
    seconds = left.total_seconds() if isinstance(left, dtm.timedelta) else float(left)
    assert 0 < seconds < 30
    fake_telegram.chat_min_interval(chat, None)
    await bot.send_message_draft(chat, 1, "ab")
    assert fake_telegram.draft_states(chat) == ["a", "ab"]
