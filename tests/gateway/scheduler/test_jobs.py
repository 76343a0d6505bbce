"""``Jobs``: what is made, who sees it, the limits, and that a refusal leaves nothing behind."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from adapters.base import ChatInfo, ChatType
from gateway.config import CronConfig
from gateway.errors import JobError
from gateway.routing.home_channels import HomeChannels
from gateway.scheduler import JobOwner, Jobs, JobSpec, describe_job
from gateway.scheduler.clock import FakeClock
from storage import StateStore
from tests.gateway._chat_adapter import ChatAdapter

NOW = 1_800_000_000.0
ALICE = JobOwner("testchat", "c1", None, "alice", "agent:main:testchat:dm:c1")
BOB = JobOwner("testchat", "c2", None, "bob", "agent:main:testchat:dm:c2")
ALICE_ELSEWHERE = JobOwner("testchat", "g9", None, "alice", "agent:main:testchat:group:g9", "group")


class PickyChat(ChatAdapter):
    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        if chat_id != "known":
            raise ConnectionError("chat not found")
        return ChatInfo(chat_id, ChatType.GROUP)


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[StateStore]:
    async with StateStore(tmp_path / "state.db") as s:
        yield s


def make_jobs(store: StateStore, *, cross_user: bool = False, **cron: object) -> Jobs:
    settings = CronConfig(timezone="Europe/Berlin", **cron)  # type: ignore[arg-type]
    adapters = {"testchat": ChatAdapter(), "picky": PickyChat("picky"), "cli": ChatAdapter("cli")}
    return Jobs(store, settings, adapters=adapters, home_channels=HomeChannels(store), cross_user=cross_user,
                clock=FakeClock(NOW))


def rows(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM gateway_cron_jobs").fetchone()[0])


async def test_create_stores_the_job_and_lists_it(store: StateStore, tmp_path: Path) -> None:
    jobs = make_jobs(store)
    view = await jobs.create(ALICE, JobSpec("inbox", "Summarise my inbox", "0 8 * * 1-5"))
    assert (view.kind, view.deliver, view.paused, view.failures, view.last_status) == ("cron", "origin", False, 0,
                                                                                     None)
    assert view.next_due is not None and view.next_due > NOW and len(view.id) == 8
    assert [v.id for v in await jobs.list(ALICE)] == [view.id]
    assert (await jobs.get(ALICE, "inbox")).id == view.id
    assert (await jobs.get(ALICE, view.id[:5])).id == view.id
    assert jobs.tz == "Europe/Berlin"
    line = describe_job(view, tz=jobs.tz)
    assert "inbox" in line and view.id in line and "0 8 * * 1-5" in line and "next 20" in line
    # a fresh Jobs reads the same from state.db
    again = make_jobs(store)
    await again.load()
    assert (await again.get(None, view.id)) == view
    assert rows(tmp_path / "state.db") == 1


async def test_visibility_is_the_chat_or_the_same_user(store: StateStore) -> None:
    jobs = make_jobs(store)
    mine = await jobs.create(ALICE, JobSpec("a", "p", "every 1h"))
    await jobs.create(BOB, JobSpec("b", "p", "every 1h"))
    assert [v.name for v in await jobs.list(ALICE)] == ["a"]
    assert [v.name for v in await jobs.list(ALICE_ELSEWHERE)] == ["a"]  # same platform and user
    assert [v.name for v in await jobs.list(None)] == ["a", "b"]
    with pytest.raises(JobError, match="No job"):
        await jobs.get(BOB, "a")
    with pytest.raises(JobError, match="No job"):
        await jobs.pause(BOB, mine.id)
    assert not (await jobs.get(ALICE, "a")).paused
    shared = make_jobs(store, cross_user=True)
    await shared.load()
    assert len(await shared.list(BOB)) == 2


async def test_pause_resume_update_remove(store: StateStore) -> None:
    jobs = make_jobs(store)
    view = await jobs.create(ALICE, JobSpec("a", "p", "every 1h"))
    paused = await jobs.pause(ALICE, "a")
    assert paused.paused and paused.next_due is None and jobs.next_due() is None
    resumed = await jobs.resume(ALICE, "a")
    assert not resumed.paused and resumed.next_due == NOW + 3600
    changed = await jobs.update(ALICE, "a", name="b", prompt="q", schedule="every 2h")
    assert (changed.name, changed.prompt, changed.schedule, changed.next_due) == ("b", "q", "every 2h",
                                                                                  NOW + 7200)
    assert jobs.next_due() == changed
    assert jobs.status()["next"]["name"] == "b"
    gone = await jobs.remove(ALICE, view.id)
    assert gone.id == view.id and await jobs.list(None) == []


async def test_names_are_unique_per_owner_and_refs_can_be_ambiguous(store: StateStore) -> None:
    jobs = make_jobs(store)
    await jobs.create(ALICE, JobSpec("daily", "p", "every 1d"))
    with pytest.raises(JobError, match="named 'daily' here already"):
        await jobs.create(ALICE, JobSpec("daily", "p2", "every 1d"))
    await jobs.create(ALICE_ELSEWHERE, JobSpec("daily", "p", "every 1d"))
    with pytest.raises(JobError, match="Several jobs"):
        await jobs.get(ALICE, "daily")
    other = await jobs.create(ALICE, JobSpec("other", "p", "every 1d"))
    with pytest.raises(JobError, match="named 'daily' here already"):
        await jobs.update(ALICE, other.id, name="daily")
    assert len(await jobs.list(None)) == 3


@pytest.mark.parametrize(("spec", "says"), [
    (JobSpec("x", "p", "every 10s"), "cron.min_interval"),
    (JobSpec("x", "p", "2001-01-01T00:00"), "in the past"),
    (JobSpec("x", "p", "0 8 * *"), "five fields"),
    (JobSpec("x", "p" * 9000, "every 1h"), "cron.max_prompt_chars"),
    (JobSpec("x", "   ", "every 1h"), "needs a prompt"),
    (JobSpec("", "p", "every 1h"), "1 to 64"),
    (JobSpec("n" * 65, "p", "every 1h"), "1 to 64"),
    (JobSpec("x", "p", "every 1h", deliver="home:testchat"), "/sethome"),
    (JobSpec("x", "p", "every 1h", deliver="home:telegram"), "not a platform this gateway can post to"),
    (JobSpec("x", "p", "every 1h", deliver="discord:123"), "not a platform this gateway can post to"),
    (JobSpec("x", "p", "every 1h", deliver="cli:1"), "not a platform"),
    (JobSpec("x", "p", "every 1h", deliver="picky:nope"), "cannot post to picky chat nope"),
    (JobSpec("x", "p", "every 1h", deliver="somewhere"), "do not know where"),
])
async def test_bad_input_is_refused_and_nothing_is_made(store: StateStore, tmp_path: Path, spec: JobSpec,
                                                        says: str) -> None:
    jobs = make_jobs(store)
    with pytest.raises(JobError, match=says):
        await jobs.create(ALICE, spec)
    assert rows(tmp_path / "state.db") == 0 and await jobs.list(None) == []


async def test_destinations_that_can_be_posted_to(store: StateStore) -> None:
    jobs = make_jobs(store)
    await HomeChannels(store).set("testchat", "home-room", None, ChatType.GROUP, "alice")
    for i, deliver in enumerate(("home:testchat", "picky:known", "testchat:room:thread", "none", "origin")):
        assert (await jobs.create(ALICE, JobSpec(f"j{i}", "p", "every 1h", deliver=deliver))).deliver == deliver
    terminal = JobOwner("cli", "t1", None, "me", "cli:t1")
    with pytest.raises(JobError, match="cannot be sent to this chat later"):
        await jobs.create(terminal, JobSpec("t", "p", "every 1h"))
    assert (await jobs.create(terminal, JobSpec("t", "p", "every 1h", deliver="home:testchat"))).deliver


async def test_the_limit_per_owner(store: StateStore, tmp_path: Path) -> None:
    jobs = make_jobs(store, max_jobs_per_owner=3)
    for i in range(3):
        await jobs.create(ALICE, JobSpec(f"j{i}", "p", "every 1h"))
    with pytest.raises(JobError, match=r"cron\.max_jobs_per_owner"):
        await jobs.create(ALICE, JobSpec("j3", "p", "every 1h"))
    with pytest.raises(JobError, match=r"cron\.max_jobs_per_owner"):  # another chat of hers: the same user
        await jobs.create(ALICE_ELSEWHERE, JobSpec("j3", "p", "every 1h"))
    await jobs.create(BOB, JobSpec("j3", "p", "every 1h"))  # another owner has their own
    assert rows(tmp_path / "state.db") == 4


async def test_switched_off(store: StateStore) -> None:
    jobs = make_jobs(store, enabled=False)
    with pytest.raises(JobError, match=r"cron\.enabled"):
        await jobs.create(ALICE, JobSpec("a", "p", "every 1h"))


async def test_run_now_marks_the_job(store: StateStore) -> None:
    jobs = make_jobs(store)
    heard: list[str] = []
    jobs.watch(lambda row: heard.append(row.id) if row.run_requested else None)
    view = await jobs.create(ALICE, JobSpec("a", "p", "every 1h"))
    await jobs.run_now(ALICE, "a")
    assert heard == [view.id]
