"""/cron on a chat platform through the real daemon, and who sees which jobs."""

from __future__ import annotations

from pathlib import Path

from adapters.base import ChatType
from gateway.scheduler import JobOwner, JobSpec
from tests.fakes.openai_server import FakeOpenAI

from ._env import all_jobs, jobs, running, say


def _owner(user: str, chat: str | None = None, chat_type: str = "dm") -> JobOwner:
    where = chat or user
    key = f"agent:main:testchat:{chat_type}:{where}" + (f":{user}" if chat_type != "dm" else "")
    return JobOwner("testchat", where, None, user, key, chat_type)


async def test_cron_lists_pauses_resumes_runs_and_removes(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with running(gateway_home, fake_openai) as run:
        assert (await say(run, "/cron")).startswith("No scheduled jobs here.")
        made = await jobs(run).create(_owner("u1"), JobSpec("standup", "Remind the user to stand up.",
                                                            "0 9 * * 1-5"))
        listed = await say(run, "/cron list")
        assert listed.splitlines()[0].startswith("⏰ Scheduled jobs (1)")
        assert f"standup [{made.id}] · 0 9 * * 1-5 · next " in listed
        assert (await say(run, "/cron pause standup")).startswith(f"⏸ Paused standup [{made.id}]")
        assert "paused" in await say(run, "/cron")
        assert (await say(run, f"/cron resume {made.id}")).startswith(f"▶️ Resumed standup [{made.id}]: next run ")
        assert (await say(run, "/cron run standup")).startswith(f"🏃 Running standup [{made.id}] now")
        delivered = await run.chat.wait_sent(7, chat="u1", timeout=15)
        assert any("echo: " in m.text and "Remind the user to stand up." in m.text for m in delivered)
        assert (await say(run, "/cron remove standup")) == f"🗑 Removed standup [{made.id}]."
        assert await all_jobs(run) == []
        assert (await say(run, "/cron pause standup")).startswith("⚠️ No job 'standup' here")
        assert (await say(run, "/cron pause")) == "Usage: /cron pause <name or id> (/cron lists them)"
        assert (await say(run, "/cron explode")).startswith("Usage: /cron [list]")
        assert "/cron [list|pause|resume|remove|run <name or id>]" in await say(run, "/help")


async def test_another_user_in_the_same_group_sees_only_their_own(gateway_home: Path,
                                                                  fake_openai: FakeOpenAI) -> None:
    group = {"chat": "g1", "chat_type": ChatType.GROUP}
    for name, schedule in (("mine", "every 1h"), ("theirs", "every 2h")):
        fake_openai.reply_tool_calls([{"id": name, "name": "cronjob", "arguments": {
            "action": "create", "name": name, "schedule": schedule, "prompt": f"Say {name}."}}]).reply("Made.")
    async with running(gateway_home, fake_openai) as run:
        assert await say(run, "every hour say mine", user="u1", **group) == "Made."
        assert await say(run, "every 2 hours say theirs", user="u2", **group) == "Made."
        by_name = {j.name: j for j in await all_jobs(run)}
        u1 = await say(run, "/cron", user="u1", **group)
        u2 = await say(run, "/cron", user="u2", **group)
        refused = await say(run, f"/cron remove {by_name['mine'].id}", user="u2", **group)
        # u1's direct chat with the bot is the same person on the same platform: it sees the job too
        dm = await say(run, "/cron", user="u1")
        assert len(await all_jobs(run)) == 2
    mine, theirs = by_name["mine"], by_name["theirs"]
    assert mine.owner == _owner("u1", "g1", "group") and theirs.owner == _owner("u2", "g1", "group")
    assert f"mine [{mine.id}]" in u1 and "theirs" not in u1
    assert f"theirs [{theirs.id}]" in u2 and "mine" not in u2
    assert refused.startswith("⚠️ No job") and f"mine [{mine.id}]" in dm


async def test_cross_user_resume_lets_everyone_see_every_job(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    config = {"sessions": {"allow_cross_user_resume": True}}
    async with running(gateway_home, fake_openai, config=config) as run:
        made = await jobs(run).create(_owner("u1"), JobSpec("standup", "Stand up.", "0 9 * * 1-5"))
        assert f"standup [{made.id}]" in await say(run, "/cron", user="u2")
