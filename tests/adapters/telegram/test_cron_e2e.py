"""Scheduled jobs on Telegram, as a person sees them: "remind me every weekday at 9" makes a job
through the agent's ``cronjob`` tool, /cron lists and manages it, and a run now is delivered to
the chat."""

from __future__ import annotations

from pathlib import Path

from gateway.scheduler import jobs_of
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from ..conftest import run_telegram_gateway
from .test_approvals_e2e import wait_said


async def test_remind_me_every_weekday_at_9_then_cron_manages_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    fake_openai.reply_tool_calls([{"id": "c1", "name": "cronjob", "arguments": {
        "action": "create", "name": "standup", "schedule": "0 9 * * 1-5",
        "prompt": "Remind the user to stand up."}}]).reply("Every weekday at 9 I will remind you.")
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        chat = fake.private_chat()["id"]
        await fake.user_says("remind me every weekday at 9 to stand up")
        await wait_said(fake, chat, "Every weekday at 9 I will remind you.")
        jobs = jobs_of(gw.gateway.services)
        assert jobs is not None
        (job,) = await jobs.list(None)
        user = str(fake.user["id"])
        assert (job.owner.platform, job.owner.chat_id, job.owner.user_id) == ("telegram", str(chat), user)
        assert job.deliver == "origin" and job.next_due is not None

        await fake.user_says("/cron")
        await wait_said(fake, chat, f"standup [{job.id}] · 0 9 * * 1-5 · next ")
        await fake.user_says("/cron pause standup")
        await wait_said(fake, chat, f"Paused standup [{job.id}]")
        await fake.user_says("/cron resume standup")
        await wait_said(fake, chat, f"Resumed standup [{job.id}]")
        await fake.user_says("/cron run standup")
        await wait_said(fake, chat, f"Running standup [{job.id}] now")
        await wait_said(fake, chat, "echo: ")  # the run's answer (the fake model echoes the prompt)
        await fake.user_says("/cron remove standup")
        await wait_said(fake, chat, f"Removed standup [{job.id}].")
        assert await jobs.list(None) == []
