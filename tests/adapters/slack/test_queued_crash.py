"""Slack never sends an acknowledged event again: a message the daemon took is kept (parked) until
it is answered, so ``kill -9`` while it waits behind a busy turn does not lose it; the turn the crash
cut off is answered after the restart too (``gateway.routing.parking``). Socket Mode, a real daemon
process against FakeSlack."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port, write_config

from .._daemon_process import daemon_process
from .._telegram_process import QUIET, until
from ..conftest import daemon_config

DM = "D0DM0001"


async def test_a_slack_message_queued_behind_a_busy_turn_survives_kill_9(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake, home = fake_slack, tmp_path / "h"

    def said() -> list[str]:
        return [str(m.get("text")) for m in fake.thread_replies(DM, None)]

    section = {"api_base_url": fake.api_base_url, "mode": "socket", "ping_interval": 0.5,
               "thinking_placeholder": False}
    write_config(home, daemon_config(fake_openai.base_url, free_port(), "slack", section, None, {"agent": QUIET}),
                 {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                  "SLACK_ALLOWED_USERS": fake.user})
    hold = fake_openai.hold_when(lambda body: "slow question" in str(body["messages"][-1]))
    async with daemon_process(home) as proc:
        await until(lambda: bool(fake.open_sockets), "the daemon to connect", proc)
        await fake.user_says("slow question")
        await until(hold.arrived.is_set, "the first turn to reach the model", proc)
        queued = await fake.user_says("the queued one")
        await until(lambda: any("Queued" in text for text in said()), "the queued message to be taken", proc)
        await until(lambda: fake.deliveries_of(queued["event_id"])[-1]["outcome"] == "acked",
                    "the queued event acknowledged (Slack never sends it again)", proc)
        proc.kill()
        await asyncio.to_thread(proc.wait, 30)
    hold.release.set()
    fake.retry_delays = (0.0, 0.5, 0.5)  # an event that met the dead socket comes again soon
    async with daemon_process(home) as proc:
        await until(lambda: len(fake.open_sockets) == 1, "the daemon to connect again", proc)
        await fake.user_says("after the restart")
        await until(lambda: "echo: after the restart" in said(), "the next message answered", proc)
    answers = [text for text in said() if text.startswith("echo: ")]
    assert answers == ["echo: slow question", "echo: the queued one", "echo: after the restart"], answers
    assert len(fake.deliveries_of(queued["event_id"])) == 1
