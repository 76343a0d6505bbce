"""``hermes-gateway cron …`` as a user runs it: the real console script in a subprocess, against a
daemon running in this process (its control socket), and without one."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from gateway.scheduler import JobOwner, JobSpec
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._console import ROOT, SCRIPT, TIMEOUT, Result, console_env

from ._env import all_jobs, jobs, running, say


async def cron(home: Path, *args: str) -> Result:
    """The daemon runs in this event loop: the CLI must not block it."""
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT), "cron", *args, env=console_env(home), cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


async def test_add_list_pause_resume_run_remove_against_the_daemon(gateway_home: Path,
                                                                   fake_openai: FakeOpenAI) -> None:
    async with running(gateway_home, fake_openai) as run:
        # No home channel yet: a job made here has nowhere to go unless told.
        r = await cron(gateway_home, "add", "--name", "inbox", "--schedule", "0 8 * * *", "--prompt", "Summarise.")
        assert r.code == 1 and "--deliver" in r.err and await all_jobs(run) == []
        assert (await say(run, "/sethome")).startswith("✅ Home channel of testchat")
        r = await cron(gateway_home, "add", "--name", "inbox", "--schedule", "0 8 * * *",
                       "--prompt", "Summarise my inbox.", "--skip-missed")
        assert r.code == 0, r.err
        (job,) = await all_jobs(run)
        assert r.out.startswith(f"Added inbox [{job.id}] · 0 8 * * * · next ")
        assert job.deliver == "home:testchat" and job.owner.platform == "cli" and job.owner.user_id
        assert job.catch_up == "skip"
        r = await cron(gateway_home, "add", "--name", "often", "--schedule", "every 5s", "--prompt", "x",
                       "--deliver", "none")
        assert r.code == 1 and "cron.min_interval" in r.err and len(await all_jobs(run)) == 1

        listed = await cron(gateway_home, "list")
        assert listed.code == 0 and listed.out.startswith("1 scheduled job (times in ")
        assert f"inbox [{job.id}] · 0 8 * * * · next " in listed.out and "(made in cli:cli)" in listed.out
        as_json = json.loads((await cron(gateway_home, "list", "--json")).out)
        assert [j["id"] for j in as_json["jobs"]] == [job.id] and as_json["jobs"][0]["deliver"] == "home:testchat"

        r = await cron(gateway_home, "pause", "inbox")
        assert r.code == 0 and r.out.startswith(f"Paused inbox [{job.id}] · 0 8 * * * · paused")
        assert (await all_jobs(run))[0].paused
        r = await cron(gateway_home, "resume", job.id)
        assert r.code == 0 and not (await all_jobs(run))[0].paused
        r = await cron(gateway_home, "run", "inbox")
        assert r.code == 0 and r.out.startswith("Running now: inbox")
        sent = await run.chat.wait_sent(2, chat="u1", timeout=15)
        assert "Summarise my inbox." in sent[-1].text
        r = await cron(gateway_home, "remove", "inbox")
        assert r.code == 0 and r.out.startswith(f"Removed inbox [{job.id}]")
        assert await all_jobs(run) == []
        r = await cron(gateway_home, "remove", "inbox")
        assert r.code == 1 and "No job 'inbox'" in r.err
        assert (await cron(gateway_home, "list")).out == "No scheduled jobs.\n"


def cron_sync(home: Path, *args: str) -> Result:
    proc = subprocess.run([str(SCRIPT), "cron", *args], env=console_env(home), cwd=ROOT, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def test_without_a_daemon_changes_say_it_is_not_running(gateway_home: Path) -> None:
    gateway_home.mkdir(parents=True)
    for args in (["add", "--name", "a", "--schedule", "every 1h", "--prompt", "p"], ["pause", "a"],
                 ["resume", "a"], ["run", "a"], ["remove", "a"]):
        r = cron_sync(gateway_home, *args)
        assert r.code == 3 and "the daemon is not running" in r.err, (args, r)
        assert r.out == ""
    r = cron_sync(gateway_home, "list")
    assert (r.code, r.out) == (0, "No scheduled jobs.\n") and "the daemon is not running" in r.err
    assert not (gateway_home / "state.db").exists()


async def test_list_without_a_daemon_reads_state_db(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with running(gateway_home, fake_openai) as run:
        made = await jobs(run).create(JobOwner("testchat", "u1", None, "u1", "agent:main:testchat:dm:u1"),
                                      JobSpec("standup", "Stand up.", "0 9 * * 1-5"))
        await jobs(run).pause(None, made.id)
    r = await cron(gateway_home, "list", "--json")
    assert r.code == 0 and "the daemon is not running" in r.err
    (job,) = json.loads(r.out)["jobs"]
    assert (job["id"], job["name"], job["paused"], job["owner"]["platform"]) == (made.id, "standup", True,
                                                                                 "testchat")


def test_a_broken_config_exits_78(gateway_home: Path) -> None:
    gateway_home.mkdir(parents=True)
    (gateway_home / "config.yaml").write_text("cron: {max_failures: 0}\n")
    r = cron_sync(gateway_home, "list")
    assert r.code == 78 and "configuration error" in r.err
