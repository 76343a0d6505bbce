"""FakeTelegram's inline keyboards, presses, answerCallbackQuery and editMessageReplyMarkup, with the
real python-telegram-bot."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update
from telegram.error import BadRequest

from tests.emulators import FakeTelegram
from tests.emulators._telegram_buttons import QUERY_TTL

pytest_plugins = ["tests.emulators.plugin"]


@pytest.fixture
async def bot(fake_telegram: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(fake_telegram.token, base_url=fake_telegram.base_url,
                   base_file_url=fake_telegram.base_file_url) as b:
        yield b


def _keyboard(*datas: str) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup([[InlineKeyboardButton(f"b{i}", callback_data=d) for i, d in enumerate(datas)]])


async def test_a_press_is_a_callback_query_and_can_be_answered_once(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake = fake_telegram
    chat = fake.private_chat()
    sent = await bot.send_message(chat["id"], "Sure?", reply_markup=_keyboard("yes", "no"))
    update = await fake.user_presses((chat, sent.message_id), "yes")
    got = Update.de_json((await bot.get_updates())[-1].to_dict(), bot)
    query = got.callback_query
    assert query is not None and query.data == "yes" and query.from_user is not None
    assert query.from_user.id == fake.user["id"] and query.message is not None
    assert query.message.message_id == sent.message_id and update["callback_query"]["id"] == query.id
    assert await bot.answer_callback_query(query.id)
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_callback_query(query.id)  # answered already
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_callback_query("12345")
    assert [a["id"] for a in fake.buttons.answers] == [query.id]


async def test_an_old_press_cannot_be_answered(fake_telegram: FakeTelegram, bot: Bot) -> None:
    fake = fake_telegram
    chat = fake.private_chat()
    sent = await bot.send_message(chat["id"], "Sure?", reply_markup=_keyboard("yes"))
    update = await fake.user_presses((chat, sent.message_id), "yes", age=QUERY_TTL + 1)
    with pytest.raises(BadRequest, match=r"(?i)query is too old"):
        await bot.answer_callback_query(update["callback_query"]["id"])


async def test_button_data_is_checked_like_the_bot_api(fake_telegram: FakeTelegram, bot: Bot) -> None:
    chat = fake_telegram.private_chat()
    with pytest.raises(BadRequest, match=r"(?i)button_data_invalid"):
        await bot.send_message(chat["id"], "x", reply_markup=_keyboard("x" * 65))
    with pytest.raises(BadRequest, match=r"(?i)button_data_invalid"):
        await bot.send_message(chat["id"], "x", reply_markup=_keyboard(""))
    await bot.send_message(chat["id"], "x", reply_markup=_keyboard("é" * 32))  # 64 bytes


async def test_edits_take_the_keyboard_away_and_a_gone_button_cannot_be_pressed(
    fake_telegram: FakeTelegram, bot: Bot
) -> None:
    fake = fake_telegram
    chat = fake.private_chat()
    sent = await bot.send_message(chat["id"], "Sure?", reply_markup=_keyboard("yes"))
    await bot.edit_message_text("Answered", chat_id=chat["id"], message_id=sent.message_id)
    shown = fake.message(chat, sent.message_id)
    assert shown is not None and "reply_markup" not in shown
    with pytest.raises(AssertionError, match="no button"):
        await fake.user_presses((chat, sent.message_id), "yes")
    await fake.user_presses((chat, sent.message_id), "yes", stale=True)  # a client that missed the edit
    await bot.edit_message_reply_markup(chat["id"], sent.message_id, reply_markup=_keyboard("again"))
    with pytest.raises(BadRequest, match="not modified"):
        await bot.edit_message_reply_markup(chat["id"], sent.message_id, reply_markup=_keyboard("again"))
    assert [e["message_id"] for e in fake.buttons.markup_edits] == [sent.message_id]
