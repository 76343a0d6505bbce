"""A message queued behind a busy chat, then ``kill -9``.

The router returns ``ACCEPTED`` once a message waits in its chat's lane (in memory), and
Telegram's offset moves past it then: Telegram will not bring it again. So it is parked in
state.db before that (``gateway.routing.parking``), and taken again at the next start. The
question whose turn the crash cut off (stored, not yet answered) is answered then too."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until


def answers(fake: FakeTelegram, chat_id: int) -> list[str]:
    return [str(m.get("rendered") or m["text"]) for m in fake.sent if m["chat_id"] == chat_id]


async def test_a_message_queued_behind_a_busy_turn_survives_kill_9(tmp_path: Path, fake_openai: FakeOpenAI,
                                                                   fake_telegram: FakeTelegram) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    chat = fake.user["id"]
    hold = fake_openai.hold_when(lambda body: "slow question" in str(body["messages"][-1]))
    async with telegram_daemon(home, fake, fake_openai) as proc:
        await until(fake.connected, "the daemon to poll", proc)
        await fake.user_says("slow question")
        await until(hold.arrived.is_set, "the first turn to reach the model", proc)
        queued = await fake.user_says("the queued one")
        # Telegram was told it has it: the next getUpdates asked from past it
        await until(lambda: fake.acked_offset > queued["update_id"], "the queued update to be confirmed", proc)
        proc.kill()
        await asyncio.to_thread(proc.wait, 30)
    hold.release.set()
    async with telegram_daemon(home, fake, fake_openai) as proc:
        # a message after the restart comes after the queued one in the chat's order
        await until(fake.connected, "the daemon to poll again", proc)
        await fake.user_says("after the restart")
        await until(lambda: "echo: after the restart" in answers(fake, chat), "the next message answered", proc)
    said = answers(fake, chat)
    assert said.count("echo: the queued one") == 1
    # the turn the crash cut off (its question stored) is answered after the restart, once
    assert said.count("echo: slow question") == 1
    # in the chat's order: the cut-off question, the queued one, then what came after the restart
    order = [said.index(f"echo: {text}") for text in ("slow question", "the queued one", "after the restart")]
    assert order == sorted(order)
