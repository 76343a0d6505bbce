"""Discord never sends a gateway event again: a message the daemon took is kept (parked) until it is
answered, so ``kill -9`` while it waits behind a busy turn does not lose it; the turn the crash cut off
is answered after the restart too (``gateway.routing.parking``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port, write_config

from .._daemon_process import daemon_process
from .._telegram_process import QUIET, until
from ..conftest import daemon_config
from .test_adapter import discord_config


async def test_a_discord_message_queued_behind_a_busy_turn_survives_kill_9(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord) -> None:
    fake, home = fake_discord, tmp_path / "h"
    dm = fake.dm_channel(fake.user)["id"]

    def said() -> list[str]:
        return [str(m["content"]) for m in fake.channel_messages(dm) if m["author"]["id"] == fake.bot["id"]]

    write_config(home, daemon_config(fake_openai.base_url, free_port(), "discord", discord_config(fake),
                                     {"agent": QUIET}),
                 {"DISCORD_BOT_TOKEN": fake.token, "DISCORD_ALLOWED_USERS": fake.user["id"]})
    hold = fake_openai.hold_when(lambda body: "slow question" in str(body["messages"][-1]))
    async with daemon_process(home) as proc:
        await until(fake.connected, "the daemon to connect", proc)
        await fake.user_says("slow question")
        await until(hold.arrived.is_set, "the first turn to reach the model", proc)
        await fake.user_says("the queued one")
        await until(lambda: any("Queued" in text for text in said()), "the queued message to be taken", proc)
        proc.kill()
        await asyncio.to_thread(proc.wait, 30)
    hold.release.set()
    async with daemon_process(home) as proc:
        await until(fake.connected, "the daemon to connect again", proc)
        await fake.user_says("after the restart")
        await until(lambda: "echo: after the restart" in said(), "the next message answered", proc)
    answers = [text for text in said() if text.startswith("echo: ")]
    assert answers == ["echo: slow question", "echo: the queued one", "echo: after the restart"]
