"""The agent's ``cronjob`` tool through the real daemon: a chat message, the fake model calls the
tool, the job is made (or refused) by the daemon's ``Jobs``, and the model reads the result."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from zoneinfo import ZoneInfo

from gateway.commands import job_zone
from gateway.scheduler import JobOwner, JobSpec
from tests.fakes.openai_server import FakeOpenAI

from ._env import all_jobs, jobs, result_json, running, say, tool_results

STANDUP = {"action": "create", "name": "standup", "schedule": "0 9 * * 1-5",
           "prompt": "Remind the user to stand up."}


async def test_remind_me_every_weekday_at_9(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply_tool_calls([{"id": "c1", "name": "cronjob", "arguments": STANDUP}])
    fake_openai.reply("Done: I will remind you every weekday at 9.")
    async with running(gateway_home, fake_openai) as run:
        reply = await say(run, "remind me every weekday at 9 to stand up")
        (job,) = await all_jobs(run)
        tz = job_zone(run.gateway.services.config)  # type: ignore[union-attr]
    assert reply == "Done: I will remind you every weekday at 9."
    assert "cronjob" in {t["function"]["name"] for t in fake_openai.chat_requests[0].body["tools"]}
    assert job.name == "standup" and job.prompt == "Remind the user to stand up." and job.kind == "cron"
    assert job.deliver == "origin" and not job.paused and job.catch_up == "once"
    assert job.owner == JobOwner("testchat", "u1", None, "u1", "agent:main:testchat:dm:u1", "dm")
    assert job.next_due is not None and job.next_due > time.time()
    due = dt.datetime.fromtimestamp(job.next_due, ZoneInfo(tz))
    assert (due.hour, due.minute, due.weekday() < 5) == (9, 0, True)
    (result,) = tool_results(fake_openai)
    told = result_json(result)
    assert told["success"] and told["job"]["name"] == "standup" and told["job"]["id"] == job.id
    assert told["next_run"] == due.strftime("%Y-%m-%d %H:%M %Z") and told["timezone"] == tz


async def test_list_update_pause_resume_run_remove_through_the_tool(gateway_home: Path,
                                                                    fake_openai: FakeOpenAI) -> None:
    steps = [{**STANDUP, "catch_up": "skip", "toolsets": ["memory"]}, {"action": "list"},
             {"action": "update", "name": "standup", "schedule": "every 2h"},
             {"action": "pause", "name": "standup"}, {"action": "resume", "name": "standup"},
             {"action": "remove", "name": "standup"}, {"action": "list"}]
    for n, args in enumerate(steps):
        fake_openai.reply_tool_calls([{"id": f"c{n}", "name": "cronjob", "arguments": args}])
    fake_openai.reply("All done.")
    async with running(gateway_home, fake_openai) as run:
        assert await say(run, "make, change and remove a job") == "All done."
        assert await all_jobs(run) == []
    made, listed, updated, paused, resumed, removed, empty = map(result_json, tool_results(fake_openai))
    job_id = made["job"]["id"]
    assert made["job"]["catch_up"] == "skip" and made["job"]["toolsets"] == ["memory"]
    assert listed["count"] == 1 and listed["jobs"][0]["id"] == job_id
    assert updated["job"]["schedule"] == "every 2h" and updated["job"]["kind"] == "every"
    assert paused["job"]["paused"] and paused["next_run"] is None
    assert not resumed["job"]["paused"] and resumed["next_run"]
    assert removed["job"]["id"] == job_id and empty == {"success": True, "timezone": made["timezone"],
                                                         "count": 0, "jobs": []}


async def test_run_now_through_the_tool_delivers_the_answer_to_the_chat(gateway_home: Path,
                                                                        fake_openai: FakeOpenAI) -> None:
    fake_openai.reply_tool_calls([{"id": "c1", "name": "cronjob", "arguments": STANDUP}])
    fake_openai.reply_tool_calls([{"id": "c2", "name": "cronjob", "arguments": {"action": "run", "name": "standup"}}])
    fake_openai.reply("It runs now.")
    # The run's own model call waits until this turn has answered, so the script stays in order;
    # the run then gets the fake's echo of its prompt.
    held = fake_openai.hold_when(lambda body: any(
        m.get("role") == "user" and "Remind the user to stand up." in str(m.get("content"))
        for m in body.get("messages") or []))
    async with running(gateway_home, fake_openai) as run:
        assert await say(run, "make a job and run it now") == "It runs now."
        held.release.set()
        sent = await run.chat.wait_sent(2, chat="u1", timeout=15)
        (job,) = await all_jobs(run)
    assert "Remind the user to stand up." in sent[1].text
    assert result_json(tool_results(fake_openai)[1])["job"]["id"] == job.id


async def test_bad_input_is_refused_with_a_clear_message_and_nothing_is_made(gateway_home: Path,
                                                                            fake_openai: FakeOpenAI) -> None:
    config = {"cron": {"max_prompt_chars": 100, "max_jobs_per_owner": 1}}
    bad = [
        ({"schedule": "61 25 * * *"}, "not a valid cron expression"),
        ({"schedule": "2020-01-01T08:00"}, "in the past"),
        ({"schedule": "every 10s"}, "cron.min_interval"),
        ({"prompt": "x" * 101}, "cron.max_prompt_chars"),
        ({"deliver": "nowhere:42"}, "not a platform this gateway can post to"),
        ({"deliver": "home:testchat"}, "no home channel"),
        ({"name": "second"}, "cron.max_jobs_per_owner"),  # after the one good job below
    ]
    calls = [{**STANDUP, **change, "name": change.get("name", f"bad{n}")} for n, (change, _) in enumerate(bad[:-1])]
    calls += [STANDUP, {**STANDUP, **bad[-1][0]}]
    for n, args in enumerate(calls):
        fake_openai.reply_tool_calls([{"id": f"c{n}", "name": "cronjob", "arguments": args}])
    fake_openai.reply("Some of that did not work.")
    async with running(gateway_home, fake_openai, config=config) as run:
        await say(run, "make these jobs")
        made = await all_jobs(run)
    results = tool_results(fake_openai)
    assert [j.name for j in made] == ["standup"]
    for (_, message), text in zip(bad[:-1], results[:-2], strict=True):
        assert text.startswith("Error: ") and message in text and "Nothing was changed." in text, text
    assert result_json(results[-2])["success"]
    assert results[-1].startswith("Error: ") and bad[-1][1] in results[-1]


async def test_the_cron_toolset_can_be_disabled_per_platform(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    config = {"agent": {"toolsets": {"testchat": {"disabled": ["cron"]}}}}
    fake_openai.reply_tool_calls([{"id": "c1", "name": "cronjob", "arguments": STANDUP}]).reply("Hm.")
    async with running(gateway_home, fake_openai, config=config) as run:
        await say(run, "remind me every weekday at 9")
        assert await all_jobs(run) == []
        await run.ask("hello")  # the API server keeps it
    first, second, api = fake_openai.chat_requests
    assert "cronjob" not in {t["function"]["name"] for t in first.body.get("tools") or []}
    assert "there is no tool named 'cronjob'" in second.body["messages"][-1]["content"]
    assert "cronjob" in {t["function"]["name"] for t in api.body["tools"]}


async def test_with_cron_off_the_tool_is_not_offered_and_cron_says_so(gateway_home: Path,
                                                                      fake_openai: FakeOpenAI) -> None:
    async with running(gateway_home, fake_openai, config={"cron": {"enabled": False}}) as run:
        assert await say(run, "hello") == "echo: hello"
        assert await say(run, "/cron") == "Scheduled jobs are off in this gateway (cron.enabled)."
        tools = await say(run, "/tools")
    assert "cronjob" not in {t["function"]["name"] for t in fake_openai.chat_requests[0].body["tools"]}
    assert "cronjob (cron): scheduled jobs are off (cron.enabled)" in tools


async def test_over_the_http_api_origin_is_refused_and_a_chat_destination_works(
        gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply_tool_calls([{"id": "c1", "name": "cronjob", "arguments": STANDUP}])
    fake_openai.reply_tool_calls([{"id": "c2", "name": "cronjob",
                                   "arguments": {**STANDUP, "deliver": "testchat:u1"}}])
    fake_openai.reply("Scheduled, to your testchat chat.")
    async with running(gateway_home, fake_openai) as run:
        response = await run.ask("remind me every weekday at 9", user="bob")
        (job,) = await all_jobs(run)
    assert response.json()["choices"][0]["message"]["content"] == "Scheduled, to your testchat chat."
    refused, made = tool_results(fake_openai)
    assert refused.startswith("Error: Answers cannot be sent to this chat later (api-server only answers")
    assert result_json(made)["job"]["id"] == job.id and job.deliver == "testchat:u1"
    assert (job.owner.platform, job.owner.user_id) == ("api-server", "bob")


async def test_a_job_without_a_name_is_named_by_its_prompt_and_lists_show_a_prompts_head(
        gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    prompt = "Check the build status, then " + "tell the user what changed. " * 20
    fake_openai.reply_tool_calls([{"id": "c1", "name": "cronjob", "arguments": {
        "action": "create", "schedule": "every 1h", "prompt": prompt}}])
    fake_openai.reply_tool_calls([{"id": "c2", "name": "cronjob", "arguments": {"action": "list"}}])
    fake_openai.reply("Listed.")
    async with running(gateway_home, fake_openai) as run:
        await say(run, "check the build every hour")
        (job,) = await all_jobs(run)
    assert job.name == "Check the build status then" and job.prompt == prompt.strip()
    listed = result_json(tool_results(fake_openai)[1])["jobs"][0]["prompt"]
    assert len(listed) == 300 and listed.endswith("…") and prompt.startswith(listed[:-1])


async def test_a_scheduled_run_cannot_make_more_jobs(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with running(gateway_home, fake_openai) as run:
        made = await jobs(run).create(JobOwner("testchat", "u1", None, "u1", "agent:main:testchat:dm:u1"),
                                      JobSpec("standup", "Remind the user to stand up.", "0 9 * * 1-5"))
        fake_openai.reply_tool_calls([{"id": "c1", "name": "cronjob", "arguments": {**STANDUP, "name": "more"}}])
        fake_openai.reply("Reminder: stand up.")
        await say(run, "/cron run standup")
        sent = await run.chat.wait_sent(2, chat="u1", timeout=15)
        assert [j.id for j in await all_jobs(run)] == [made.id]
    assert "Reminder: stand up." in sent[1].text
    run_request = fake_openai.chat_requests[0].body
    assert "cronjob" not in {t["function"]["name"] for t in run_request.get("tools", [])}  # not even offered
    (result,) = tool_results(fake_openai)
    assert result.startswith("Error: there is no tool named 'cronjob'")  # a model that calls it anyway
