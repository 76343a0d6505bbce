"""The scheduler inside a real daemon (state.db, the fake model, the test chat), driven by a fake
clock: due runs, catch-up after a restart, pause/resume, concurrency, failures, clock jumps."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from adapters.base import OutboundMessage, SendResult
from gateway.cli.ops import _print_status
from gateway.scheduler import JobSpec
from gateway.scheduler.clock import FakeClock
from storage import StateStore
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway
from tests.gateway.scheduler._helpers import OWNER, cron_texts, jobs, runs, settle, until

CRON = {"cron": {"timezone": "Europe/Berlin"}}


async def test_a_due_job_runs_as_its_own_session_and_is_delivered(gateway_home: Path,
                                                                   fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    async with run_gateway(gateway_home, fake_openai.base_url, config=CRON, cron_clock=clock) as gw:
        view = await jobs(gw).create(OWNER, JobSpec("inbox", "Summarise my inbox", "every 1h"))
        await settle()
        assert cron_texts(gw) == []
        clock.advance(3600)
        await until(lambda: len(cron_texts(gw)) == 1)
        sent = gw.chat.sent[-1]
        assert (sent.chat_id, sent.text) == ("c1", "⏰ inbox\n\necho: Summarise my inbox")
        assert fake_openai.chat_requests[-1].body["messages"][-1]["content"] == "Summarise my inbox"
        clock.advance(3600)
        await until(lambda: len(cron_texts(gw)) == 2)
        after = await jobs(gw).get(None, view.id)
        assert after.last_status == "ok" and after.next_due == view.next_due + 7200  # type: ignore[operator]
        store: StateStore = gw.gateway.services.store  # type: ignore[union-attr]
        last = await store.resolve_session_by_title("cron: inbox")
        session = await store.get_session(last or "")
        assert session is not None and session["source"] == "cron" and session["title"] == "cron: inbox #2"
    assert [r[1:] for r in runs(gw.db_path)] == [("ok", 1), ("ok", 1)]
    with sqlite3.connect(gw.db_path) as conn:  # the owner's chat may /resume the runs' sessions
        owned = conn.execute("SELECT COUNT(*) FROM gateway_session_bindings WHERE session_key = ?",
                             (OWNER.session_key,)).fetchone()[0]
        ledger = conn.execute("SELECT status FROM gateway_outbound WHERE text LIKE '⏰%'").fetchall()
    assert owned == 2 and [r[0] for r in ledger] == ["sent", "sent"]


async def test_run_now_and_deliver_none(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    async with run_gateway(gateway_home, fake_openai.base_url, config=CRON, cron_clock=clock) as gw:
        await jobs(gw).create(OWNER, JobSpec("quiet", "Note the weather", "every 1d", deliver="none"))
        await jobs(gw).create(OWNER, JobSpec("loud", "Say hi", "every 1d"))
        await jobs(gw).run_now(OWNER, "quiet")
        await jobs(gw).run_now(OWNER, "loud")
        await until(lambda: len(runs(gw.db_path)) == 2 and all(r[1] == "ok" for r in runs(gw.db_path)))
        await until(lambda: len(cron_texts(gw)) == 1)
        assert cron_texts(gw) == ["⏰ loud\n\necho: Say hi"]
        assert (await jobs(gw).get(None, "quiet")).next_due is not None  # its schedule goes on


async def test_catch_up_once_and_skip_after_a_restart(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    async with run_gateway(gateway_home, fake_openai.base_url, config=CRON, cron_clock=clock) as gw:
        once = await jobs(gw).create(OWNER, JobSpec("once", "Catch up", "every 1h"))
        skip = await jobs(gw).create(OWNER, JobSpec("skip", "Skip it", "every 1h", catch_up="skip"))
    clock.advance(5 * 3600 + 600)  # down for five due times
    async with run_gateway(gateway_home, fake_openai.base_url, config=CRON, cron_clock=clock) as gw:
        await until(lambda: len(cron_texts(gw)) == 1)
        await settle()
        assert cron_texts(gw) == ["⏰ once\n\necho: Catch up\n\n(It fell due 5 times while the gateway was down; "
                                  "this one run stands for them.)"]
        now = clock.now()
        for view in (once, skip):
            after = await jobs(gw).get(None, view.id)
            assert after.next_due is not None and now < after.next_due <= now + 3600
            assert after.next_due == view.next_due + 5 * 3600  # type: ignore[operator]  # still on its grid
    assert [r[1:] for r in runs(gw.db_path)] == [("ok", 1)]


async def test_pause_and_resume(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    async with run_gateway(gateway_home, fake_openai.base_url, config=CRON, cron_clock=clock) as gw:
        await jobs(gw).create(OWNER, JobSpec("p", "Ping", "every 1h"))
        await jobs(gw).pause(OWNER, "p")
        clock.advance(3 * 3600)
        await settle()
        assert cron_texts(gw) == [] and jobs(gw).next_due() is None
        resumed = await jobs(gw).resume(OWNER, "p")
        assert resumed.next_due == clock.now() + 3600  # from now: nothing made up for
        await settle()
        assert cron_texts(gw) == []
        clock.advance(3600)
        await until(lambda: len(cron_texts(gw)) == 1)


async def test_max_concurrent_and_one_run_per_job_at_once(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    hold = fake_openai.hold_when(lambda body: True)
    config = {"cron": {"timezone": "Europe/Berlin", "max_concurrent": 2}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config, cron_clock=clock) as gw:
        for i in range(4):
            await jobs(gw).create(OWNER, JobSpec(f"j{i}", f"Job {i}", "every 1h"))
        clock.advance(3600)
        await until(lambda: len(fake_openai.chat_requests) == 2)
        await settle()
        assert len(fake_openai.chat_requests) == 2  # two slots, two runs
        clock.advance(3600)  # j0 and j1 fall due again while they still run: they wait, not run twice
        await settle()
        assert len(fake_openai.chat_requests) == 2
        hold.release.set()
        await until(lambda: len(cron_texts(gw)) >= 6)
        await settle()
        assert len(cron_texts(gw)) == 6
    # j0 and j1 ran for both due times; j2 and j3 got their slot only after the second one had
    # passed, so their late run stands for it (the next due time is after the run's start)
    per_job: dict[str, int] = {}
    for job_id, status, _ in runs(gw.db_path):
        assert status == "ok"
        per_job[job_id] = per_job.get(job_id, 0) + 1
    assert sorted(per_job.values()) == [1, 1, 2, 2]


async def test_failures_pause_the_job_and_say_so(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    config = {"cron": {"timezone": "Europe/Berlin", "max_failures": 2}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config, cron_clock=clock) as gw:
        await jobs(gw).create(OWNER, JobSpec("flaky", "Try", "every 1h"))
        fake_openai.fail(500).fail(500)
        clock.advance(3600)
        await until(lambda: len(cron_texts(gw)) == 1)
        assert cron_texts(gw)[0].startswith("⚠️ Scheduled job 'flaky' failed: ")
        assert "paused" not in cron_texts(gw)[0]
        clock.advance(3600)
        await until(lambda: len(cron_texts(gw)) == 2)
        assert "failed 2 times in a row and is paused now; /cron resume flaky" in cron_texts(gw)[1]
        view = await jobs(gw).get(None, "flaky")
        assert view.paused and view.failures == 2 and view.last_status == "failed"
        clock.advance(3600)
        await settle()
        assert len(cron_texts(gw)) == 2
        resumed = await jobs(gw).resume(OWNER, "flaky")
        assert resumed.failures == 0
        clock.advance(3600)
        await until(lambda: len(cron_texts(gw)) == 3)
        assert cron_texts(gw)[2] == "⏰ flaky\n\necho: Try"
        assert (await jobs(gw).get(None, "flaky")).last_status == "ok"


async def test_the_job_list_agrees_with_a_runs_message_when_it_arrives(gateway_home: Path,
                                                                       fake_openai: FakeOpenAI) -> None:
    """/cron list read the moment a run's message reaches the chat already shows that run's end
    (the pause a notice announces, the 'ok' of an answer), not the state before it."""
    clock = FakeClock(time.time())
    config = {"cron": {"timezone": "Europe/Berlin", "max_failures": 1}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config, cron_clock=clock) as gw:
        seen: list[tuple[str, bool, str | None]] = []
        chat, send = gw.chat, gw.chat.send

        async def send_and_look(message: OutboundMessage) -> SendResult:
            if message.text.startswith(("⏰", "⚠️ Scheduled")):
                row = jobs(gw).row(job.id)
                assert row is not None
                seen.append(("notice" if message.text.startswith("⚠️") else "answer", row.paused, row.last_status))
            return await send(message)

        chat.send = send_and_look  # type: ignore[method-assign]
        job = await jobs(gw).create(OWNER, JobSpec("once", "Try", "every 1h"))
        fake_openai.fail(500)
        clock.advance(3600)
        await until(lambda: len(seen) == 1)
        await jobs(gw).resume(OWNER, "once")
        clock.advance(3600)
        await until(lambda: len(seen) == 2)
    assert seen == [("notice", True, "failed"), ("answer", False, "ok")]


async def test_clock_jumps(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    async with run_gateway(gateway_home, fake_openai.base_url, config=CRON, cron_clock=clock) as gw:
        await jobs(gw).create(OWNER, JobSpec("tick", "Tick", "every 1h"))
        clock.advance(3600)
        await until(lambda: len(cron_texts(gw)) == 1)
        # Set back two hours: the due time that ran is not run again when its hour comes back.
        clock.advance(-2 * 3600)
        await settle()
        for _ in range(2):  # back at the hour that ran: it does not run again
            clock.advance(3600)
            await settle()
        clock.advance(3599)
        await settle()
        assert len(cron_texts(gw)) == 1
        clock.advance(1)
        await until(lambda: len(cron_texts(gw)) == 2)
        # Forward a day: one run for what it jumped over, and the grid goes on.
        clock.advance(24 * 3600 + 30)
        await until(lambda: len(cron_texts(gw)) == 3)
        await settle()
        assert len(cron_texts(gw)) == 3 and "24 times" in cron_texts(gw)[2]
    assert [r[1] for r in runs(gw.db_path)] == ["ok", "ok", "ok"]


async def test_status_shows_the_next_job(gateway_home: Path, fake_openai: FakeOpenAI,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    clock = FakeClock(time.time())
    async with run_gateway(gateway_home, fake_openai.base_url, config=CRON, cron_clock=clock,
                           env={"TESTCHAT_ALLOWED_USERS": "alice,bob"}) as gw:
        await jobs(gw).create(OWNER, JobSpec("later", "x", "every 2h"))
        soon = await jobs(gw).create(OWNER, JobSpec("soon", "x", "every 1h"))
        from gateway.status import status_snapshot

        body = status_snapshot(gw.gateway)
        assert body["cron"]["jobs"] == 2 and body["cron"]["next"]["id"] == soon.id
        metrics = gw.gateway.metrics.render().decode()
        assert "hermes_cron_runs_total" in metrics and "hermes_cron_lateness_seconds_bucket" in metrics
        await gw.chat.say("/status", user="alice", chat="c1")
        await until(lambda: any("Next scheduled job: soon" in m.text for m in gw.chat.sent))
        await gw.chat.say("/status", user="bob", chat="c2")  # bob sees none of alice's jobs
        await until(lambda: any(m.chat_id == "c2" and m.text.startswith("Session") for m in gw.chat.sent))
        assert not any(m.chat_id == "c2" and "scheduled job" in m.text for m in gw.chat.sent)
    _print_status({**body, "source": "the control socket"})
    assert f"Jobs: 2 scheduled (0 paused), next: soon [{soon.id}] at " in capsys.readouterr().out


async def test_a_job_runs_with_its_own_toolsets(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    async with run_gateway(gateway_home, fake_openai.base_url, config=CRON, cron_clock=clock) as gw:
        await jobs(gw).create(OWNER, JobSpec("all", "With every tool", "every 1d"))
        await jobs(gw).create(OWNER, JobSpec("memory", "Only memory", "every 1d", toolsets=("memory",)))
        await jobs(gw).create(OWNER, JobSpec("bare", "No tools", "every 1d", toolsets=()))
        for name in ("all", "memory", "bare"):
            await jobs(gw).run_now(OWNER, name)
            await until(lambda n=name: any(n in t for t in cron_texts(gw)))  # type: ignore[misc]

    def offered(prompt: str) -> set[str]:
        body = next(r.body for r in fake_openai.chat_requests if r.body["messages"][-1]["content"] == prompt)
        return {t["function"]["name"] for t in body.get("tools") or []}

    everything, memory = offered("With every tool"), offered("Only memory")
    assert "memory" in everything and len(everything) > len(memory)
    assert memory == {"memory"} and offered("No tools") == set()


async def test_a_stop_cuts_a_run_after_the_drain_and_the_next_start_retries_it(gateway_home: Path,
                                                                            fake_openai: FakeOpenAI) -> None:
    clock = FakeClock(time.time())
    config = {**CRON, "gateway": {"drain_timeout": 0.5}}
    fake_openai.hang()  # the run's model call never answers
    started = time.monotonic()
    async with run_gateway(gateway_home, fake_openai.base_url, config=config, cron_clock=clock) as gw:
        await jobs(gw).create(OWNER, JobSpec("slow", "Take your time", "every 1d"))
        await jobs(gw).run_now(OWNER, "slow")
        await until(lambda: len(fake_openai.chat_requests) == 1)
    assert time.monotonic() - started < 20  # the stop did not wait for the model
    assert [r[1:] for r in runs(gw.db_path)] == [("running", 1)]
    async with run_gateway(gateway_home, fake_openai.base_url, config=config, cron_clock=clock) as gw:
        await until(lambda: len(cron_texts(gw)) == 1)
        assert cron_texts(gw) == ["⏰ slow\n\necho: Take your time"]
    assert [r[1:] for r in runs(gw.db_path)] == [("interrupted", 1), ("ok", 2)]
