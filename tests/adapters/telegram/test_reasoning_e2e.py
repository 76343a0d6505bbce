"""/reasoning on Telegram: the real daemon and python-telegram-bot against ``FakeTelegram``, a
reasoning model (``reasoning_content``) and a local one (``<think>`` blocks) played by ``FakeOpenAI``.

The reasoning is never the answer and is always stored; with /reasoning on it comes first, as an
expandable blockquote (the emulator parses the MarkdownV2 as Telegram does)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from ..conftest import rows, run_telegram_gateway

WAIT = 20.0
THOUGHT = "The user asks for 2+2. Adding gives 4 (a small sum: no tools needed)."


def bot_messages(fake: FakeTelegram, chat: int) -> list[dict[str, Any]]:
    return [s for s in fake.sent if s["method"] == "sendMessage" and s["chat_id"] == chat]


async def wait_message(fake: FakeTelegram, chat: int, part: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        return next((s for s in bot_messages(fake, chat) if part in s["rendered"]), None)

    result: dict[str, Any] = await fake.wait_for(found, WAIT, what=f"a message with {part!r}")
    return result


async def test_reasoning_on_shows_it_folded_before_the_answer_and_off_hides_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    # Whole answers: the answer is one sendMessage, so the order of messages is plain to see.
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    telegram={"streaming": False}) as gw:
        chat = fake.private_chat()["id"]
        fake_openai.reply("Hi!")
        await fake.user_says("hello")
        await wait_message(fake, chat, "Hi!")

        await fake.user_says("/reasoning")
        await wait_message(fake, chat, "hidden (it is kept with each answer)")
        await fake.user_says("/reasoning maybe")
        await wait_message(fake, chat, "I do not know 'maybe' here.")
        await fake.user_says("/reasoning on")
        await wait_message(fake, chat, "Reasoning on")

        fake_openai.reply("2 + 2 = 4.", reasoning_content=THOUGHT)
        await fake.user_says("what is 2+2?")
        answer = await wait_message(fake, chat, "2 + 2 = 4.")
        sent = bot_messages(fake, chat)
        thought = sent[sent.index(answer) - 1]
        assert THOUGHT in thought["rendered"] and thought["rendered"].startswith("💭 Reasoning")
        quote = [e for e in thought["entities"] if e["type"] == "expandable_blockquote"]
        units = thought["rendered"].encode("utf-16-le")  # entity offsets count UTF-16 code units
        [folded] = quote
        assert units[2 * folded["offset"]:2 * (folded["offset"] + folded["length"])].decode("utf-16-le") == THOUGHT
        assert "Adding" not in answer["rendered"]

        # A local model's think block: stripped from the answer, stored, shown folded.
        fake_openai.reply("<think>Three times three is nine.</think>\n\n3 × 3 = 9.")
        await fake.user_says("and 3x3?")
        answer = await wait_message(fake, chat, "3 × 3 = 9.")
        assert "<think>" not in answer["rendered"] and "nine" not in answer["rendered"]
        sent = bot_messages(fake, chat)
        assert "Three times three is nine." in sent[sent.index(answer) - 1]["rendered"]

        await fake.user_says("/reasoning off")
        await wait_message(fake, chat, "Reasoning off")
        before = len(bot_messages(fake, chat))
        fake_openai.reply("Ten.", reasoning_content="Five plus five.")
        await fake.user_says("5+5?")
        await wait_message(fake, chat, "Ten.")
        assert [m["rendered"] for m in bot_messages(fake, chat)[before:]] == ["Ten."]

    stored = rows(gw.db_path, "SELECT content, reasoning_content FROM messages WHERE role = 'assistant' "
                              "AND reasoning_content IS NOT NULL ORDER BY id")
    assert stored == [("2 + 2 = 4.", THOUGHT), ("3 × 3 = 9.", "Three times three is nine."),
                      ("Ten.", "Five plus five.")]


async def test_a_streamed_think_block_never_shows_in_the_draft(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    fake_openai.tokens_per_second = 20  # written a word at a time, so the draft shows it growing
    streaming = {"streaming": {"min_chars": 5, "first_delay": 0.05, "edit_interval": 0.2}}
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=streaming):
        chat = fake.private_chat()["id"]
        fake_openai.reply("<think>I should greet back warmly and briefly.</think>Hello to you too! "
                          "It is good to hear from you again today.")
        await fake.user_says("hello")
        answer = await wait_message(fake, chat, "Hello to you too!")
        assert "greet" not in answer["rendered"]
        drafts = fake.draft_states(chat)
        assert drafts and drafts[-1].startswith("Hello")  # it was streamed, as drafts
        shown = [*drafts, *(m["rendered"] for m in bot_messages(fake, chat))]
        assert not any("greet" in text or "think>" in text for text in shown)
