"""kill -9 during a scheduled run, then a restart: the answer reaches Telegram exactly once.

The daemon is a real process (``hermes-gateway run``) against FakeTelegram and the fake model in
this process; the job is written to state.db before it starts, due at once. Two cuts: while the
model is still answering (the run is marked interrupted and retried once), and after the answer
was stored but before Telegram took it (the ledger's recovery sends it; the run is not retried).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from gateway.routing.delivery import RECOVERED_PREFIX
from storage import CronJobRow, StateStore, cron
from tests.adapters._telegram_process import telegram_daemon, until
from tests.adapters.conftest import rows
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI


async def seed_job(home: Path, chat_id: int, user_id: int) -> None:
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)
    now = time.time()
    row = CronJobRow(
        id="feedbeef", name="digest", prompt="Write the digest", schedule="every 1h", kind="every",
        deliver="origin", toolsets=None, catch_up="once", owner_platform="telegram", owner_chat_id=str(chat_id),
        owner_thread_id=None, owner_user_id=str(user_id), owner_session_key=f"agent:main:telegram:dm:{chat_id}",
        owner_chat_type="dm", paused=False, next_due=now, run_requested=False, last_run_at=None, last_status=None,
        failures=0, created_at=now - 3600, updated_at=now)
    async with StateStore(home / "state.db") as store:
        assert await store.write(lambda c: cron.insert(c, row))


def daemon(home: Path, fake: FakeTelegram, model: FakeOpenAI) -> AbstractAsyncContextManager[subprocess.Popen[bytes]]:
    return telegram_daemon(home, fake, model, telegram={"require_mention": False}, cron={"timezone": "UTC"})


def digests(fake: FakeTelegram, chat: Any) -> list[str]:
    return [m.get("text", "") for m in fake.history(chat)
            if m.get("from", {}).get("id") == fake.bot_id and "digest" in m.get("text", "")]


def cron_runs(home: Path) -> list[tuple[str, int]]:
    return [(r[0], r[1]) for r in rows(home / "state.db", "SELECT status, attempt FROM gateway_cron_runs ORDER BY id")]


async def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    await asyncio.to_thread(proc.wait, 30)


async def test_a_run_killed_before_its_answer_is_retried_once_and_delivered_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    chat = fake.private_chat()
    await seed_job(home, chat["id"], fake.user["id"])
    fake_openai.hang()  # the first run's model call never answers
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: len(fake_openai.chat_requests) == 1, "the run's model request", proc)
        await kill(proc)
    assert cron_runs(home) == [("running", 1)]
    assert digests(fake, chat) == []
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: len(digests(fake, chat)) == 1, "the retried run's answer", proc)
        await until(lambda: cron_runs(home) == [("interrupted", 1), ("ok", 2)], "the runs settled", proc)
        await asyncio.sleep(1.0)  # nothing more comes
        assert digests(fake, chat) == ["⏰ digest\n\necho: Write the digest"]
    assert len(fake_openai.chat_requests) == 2
    assert [r[0] for r in rows(home / "state.db", "SELECT status FROM gateway_outbound")] == ["sent"]
    assert rows(home / "state.db", "SELECT last_status, failures FROM gateway_cron_jobs") == [("ok", 0)]


async def test_a_run_killed_after_its_answer_was_stored_is_sent_by_recovery_not_run_again(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    chat = fake.private_chat()
    await seed_job(home, chat["id"], fake.user["id"])
    original = fake._handlers["sendmessage"][1]
    first: list[dict[str, Any]] = []

    async def hang_the_first(params: dict[str, Any]) -> Any:
        if not first:
            first.append(params)
            await asyncio.Event().wait()  # never answers: the daemon is killed while it waits
        return original(params)

    fake.register_method("sendMessage", hang_the_first)
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: bool(first), "the answer's send", proc)
        await kill(proc)
    assert cron_runs(home) == [("ok", 1)]  # stored with its answer
    assert [r[0] for r in rows(home / "state.db", "SELECT status FROM gateway_outbound")] == ["pending"]
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: len(digests(fake, chat)) == 1, "the recovered answer", proc)
        await asyncio.sleep(1.0)
        assert digests(fake, chat) == [RECOVERED_PREFIX + "⏰ digest\n\necho: Write the digest"]
    assert cron_runs(home) == [("ok", 1)]
    assert len(fake_openai.chat_requests) == 1
    assert [r[0] for r in rows(home / "state.db", "SELECT status FROM gateway_outbound")] == ["recovered"]
