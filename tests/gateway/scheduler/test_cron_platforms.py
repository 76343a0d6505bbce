"""A scheduled run's answer reaches each platform's emulator: Telegram (the job's own chat, its
home channel, a chat named by id), Discord and Slack; a chat the bot cannot reach is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.base import ChatType
from gateway.errors import JobError
from gateway.scheduler import JobOwner, JobSpec, jobs_of
from tests.adapters.conftest import run_telegram_gateway
from tests.adapters.discord.test_adapter import run_discord_gateway
from tests.adapters.slack.test_adapter import USER, run_slack_gateway
from tests.emulators.fake_discord import FakeDiscord
from tests.emulators.fake_slack import FakeSlack
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.scheduler._helpers import until

CRON = {"cron": {"timezone": "UTC"}}


def the_jobs(gateway: Any) -> Any:
    found = jobs_of(gateway.services)
    assert found is not None
    return found


def bot_texts(fake: FakeTelegram, chat: Any) -> list[str]:
    return [m.get("text", "") for m in fake.history(chat) if m.get("from", {}).get("id") == fake.bot_id]


async def test_telegram_origin_home_and_a_named_chat(tmp_path: Path, fake_openai: FakeOpenAI,
                                                     fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    dm, group, other = fake.private_chat(), fake.group("Home"), fake.group("Elsewhere")
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=CRON) as tg:
        jobs = the_jobs(tg.gateway)
        owner = JobOwner("telegram", str(dm["id"]), None, str(fake.user["id"]), f"agent:main:telegram:dm:{dm['id']}")
        with pytest.raises(JobError, match="/sethome"):
            await jobs.create(owner, JobSpec("home", "To the home", "every 1h", deliver="home:telegram"))
        assert tg.gateway.services is not None
        await tg.gateway.services.home_channels.set("telegram", str(group["id"]), None, ChatType.GROUP, "me")
        await jobs.create(owner, JobSpec("mine", "To me", "every 1h"))
        await jobs.create(owner, JobSpec("home", "To the home", "every 1h", deliver="home:telegram"))
        await jobs.create(owner, JobSpec("there", "To there", "every 1h", deliver=f"telegram:{other['id']}"))
        with pytest.raises(JobError, match="cannot post to telegram chat 424242"):
            await jobs.create(owner, JobSpec("nowhere", "x", "every 1h", deliver="telegram:424242"))
        for name in ("mine", "home", "there"):
            await jobs.run_now(owner, name)
        await until(lambda: bot_texts(fake, dm) and bot_texts(fake, group) and bot_texts(fake, other), 20)
        assert bot_texts(fake, dm) == ["⏰ mine\n\necho: To me"]
        assert bot_texts(fake, group) == ["⏰ home\n\necho: To the home"]
        assert bot_texts(fake, other) == ["⏰ there\n\necho: To there"]


async def test_discord_channel(tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    channel = fake.add_channel("news")
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, config=CRON) as dc:
        jobs = the_jobs(dc.gateway)
        owner = JobOwner("discord", channel["id"], None, fake.user["id"], f"agent:main:discord:group:{channel['id']}",
                         "group")
        await jobs.create(owner, JobSpec("news", "The news", "every 1h"))
        await jobs.run_now(owner, "news")

        def posted() -> list[str]:
            return [m.get("content", "") for m in fake.channel_messages(channel["id"])
                    if m.get("author", {}).get("id") != fake.user["id"]]

        await until(lambda: posted(), 20)
        assert posted() == ["⏰ news\n\necho: The news"]


async def test_slack_channel(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=CRON) as sl:
        jobs = the_jobs(sl.gateway)
        owner = JobOwner("slack", "D0DM00001", None, USER, "agent:main:slack:dm:D0DM00001")
        await jobs.create(owner, JobSpec("standup", "Standup notes", "0 9 * * 1-5", deliver="slack:C0CHAN001"))
        await jobs.run_now(owner, "standup")

        def posted() -> list[str]:
            return [s["text"] for s in fake.sent if s["method"] == "chat.postMessage" and s["chat_id"] == "C0CHAN001"]

        await until(lambda: posted(), 20)
        assert len(posted()) == 1 and "standup" in posted()[0] and "echo: Standup notes" in posted()[0]
