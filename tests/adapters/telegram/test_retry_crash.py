"""kill -9 while /retry's new answer is being written, then a restart: the old answer stays set aside
(the model never sees it again), and /retry answers the question again. A real daemon process."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.adapters._telegram_process import telegram_daemon, until
from tests.adapters.conftest import rows
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI


def bot_texts(fake: FakeTelegram, chat: object) -> list[str]:
    return [str(m.get("text", "")) for m in fake.history(chat) if m.get("from", {}).get("id") == fake.bot_id]


async def test_a_retry_cut_off_by_a_crash_can_be_retried(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    chat = fake.private_chat()
    fake_openai.reply("the first answer").hang()  # the retry's model call never answers
    async with telegram_daemon(home, fake, fake_openai, telegram={"require_mention": False}) as proc:
        await until(lambda: fake.connected, "the daemon polling", proc)
        await fake.user_says("a question", chat=chat)
        await until(lambda: "the first answer" in bot_texts(fake, chat), "the first answer", proc)
        await fake.user_says("/retry", chat=chat)
        await until(lambda: len(fake_openai.chat_requests) == 2, "the retry's model request", proc)
        proc.kill()
        await asyncio.to_thread(proc.wait, 30)
    assert rows(home / "state.db", "SELECT COUNT(*) FROM gateway_superseded") == [(1,)]
    fake_openai.reply("the second answer")
    async with telegram_daemon(home, fake, fake_openai, telegram={"require_mention": False}) as proc:
        await until(lambda: fake.connected, "the daemon polling", proc)
        await fake.user_says("/retry", chat=chat)
        await until(lambda: "the second answer" in bot_texts(fake, chat), "the second answer", proc)
    messages = [(m["role"], m.get("content")) for m in fake_openai.chat_requests[-1].body["messages"]
                if m["role"] != "system"]
    assert messages == [("user", "a question")]
    assert bot_texts(fake, chat).count("the first answer") == 1
