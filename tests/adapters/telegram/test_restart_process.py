"""/restart on a real daemon process (``hermes-gateway run``) against ``FakeTelegram``: the running turn
drains, the process comes back (re-exec of itself; exit 75 for systemd to restart under a unit), the
chat hears "back" exactly once, and nothing restarts it again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.control.client import call
from gateway.errors import ControlError
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until

RESTARTING = "♻️ Restarting"
BACK = "✅ Back: the gateway restarted"


def bot_texts(fake: FakeTelegram, chat_id: int) -> list[str]:
    return [str(m.get("rendered") or m["text"]) for m in fake.sent if m["chat_id"] == chat_id]


async def status(home: Path) -> dict[str, Any] | None:
    """The daemon's status over its control socket; None while none answers."""
    try:
        return await call(home, "status", reply_within=5)
    except (ControlError, OSError):
        return None


async def wait_status(home: Path, proc: Any, what: str, check: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}

    async def poll() -> None:
        while True:
            st = await status(home)
            if st is not None and check(st):
                found.update(st)
                return
            await asyncio.sleep(0.1)

    task = asyncio.create_task(poll())
    try:
        await until(task.done, what, proc)
    finally:
        task.cancel()
    return found


@pytest.fixture(autouse=True)
def _not_under_systemd(monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon inherits this environment: a test runner inside a unit must not look like one."""
    monkeypatch.delenv("INVOCATION_ID", raising=False)
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)


async def test_restart_drains_reexecs_and_says_back_once(tmp_path: Path, fake_openai: FakeOpenAI,
                                                         fake_telegram: FakeTelegram) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    uid = fake.user["id"]
    hold = fake_openai.hold_when(lambda body: "slow question" in str(body["messages"][-1]))
    async with telegram_daemon(home, fake, fake_openai, auth={"owners": [str(uid)]}) as proc:
        first = await wait_status(home, proc, "the control socket", lambda st: True)
        assert first["pid"] == proc.pid
        await until(fake.connected, "the daemon to poll", proc)

        await fake.user_says("slow question")
        await until(hold.arrived.is_set, "the turn to reach the model", proc)
        await fake.user_says("/restart")
        await fake.user_says("/restart")  # twice, quickly
        await until(lambda: any(t.startswith(RESTARTING) for t in bot_texts(fake, uid)), "the restart notice", proc)
        assert "1 running turn(s) may finish first" in next(t for t in bot_texts(fake, uid) if t.startswith(RESTARTING))
        hold.release.set()  # the running turn ends inside the drain: its answer goes out before the stop
        await until(lambda: any(t.startswith(BACK) for t in bot_texts(fake, uid)), "the back notice", proc)

        # the same process, re-executed: the control socket answers again, from a newer start
        second = await wait_status(home, proc, "the control socket again",
                                   lambda st: st["started_at"] > first["started_at"])
        assert second["pid"] == proc.pid and proc.poll() is None
        texts = bot_texts(fake, uid)
        assert "echo: slow question" in texts
        assert texts.index("echo: slow question") < next(i for i, t in enumerate(texts) if t.startswith(BACK))
        assert sum(t.startswith(RESTARTING) for t in texts) == 1
        # the second /restart was told the first is under way, or to send it again after the restart
        assert sum(t.startswith("♻️ A restart is already under way") or t.startswith("The gateway is restarting")
                   for t in texts) == 1

        # a /restart sent before this start (a redelivery of the old one) restarts nothing
        await fake.user_says("/restart", date=int(first["started_at"]))
        await until(lambda: any(t.startswith("♻️ The gateway has started since you sent that") for t in
                                bot_texts(fake, uid)), "the stale /restart's answer", proc)
        # a message after the restart is answered, and nothing restarts the process again
        await fake.user_says("are you there")
        await until(lambda: "echo: are you there" in bot_texts(fake, uid), "an answer after the restart", proc)
        await asyncio.sleep(1.0)  # room for a wrong second restart to show itself
        third = await status(home)
        assert third is not None and third["started_at"] == second["started_at"]
        assert sum(t.startswith(BACK) for t in bot_texts(fake, uid)) == 1
        assert sum(t.startswith(RESTARTING) for t in bot_texts(fake, uid)) == 1


async def test_under_systemd_the_daemon_exits_75_and_the_next_start_says_back(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram,
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    uid = fake.user["id"]
    monkeypatch.setenv("INVOCATION_ID", "0123456789abcdef0123456789abcdef")  # as systemd sets it for a unit
    async with telegram_daemon(home, fake, fake_openai, auth={"owners": [str(uid)]}) as proc:
        await until(fake.connected, "the daemon to poll", proc)
        await fake.user_says("/restart")
        code = await asyncio.wait_for(asyncio.to_thread(proc.wait), 60)
    assert code == 75  # Restart=on-failure restarts it (RestartPreventExitStatus is only 78)
    assert not any(t.startswith(BACK) for t in bot_texts(fake, uid))
    # systemd starts it again
    async with telegram_daemon(home, fake, fake_openai, auth={"owners": [str(uid)]}) as proc:
        await until(lambda: any(t.startswith(BACK) for t in bot_texts(fake, uid)), "the back notice", proc)
        await fake.user_says("still here?")
        await until(lambda: "echo: still here?" in bot_texts(fake, uid), "an answer", proc)
        assert proc.poll() is None
        proc.kill()  # a crash right after the restart (kill -9)
        await asyncio.to_thread(proc.wait, 30)
    # the next start neither restarts nor says "back" again: nothing of the request outlived its process
    async with telegram_daemon(home, fake, fake_openai, auth={"owners": [str(uid)]}) as proc:
        await fake.user_says("and now?")
        await until(lambda: "echo: and now?" in bot_texts(fake, uid), "an answer after the crash", proc)
        assert proc.poll() is None
    texts = bot_texts(fake, uid)
    assert sum(t.startswith(BACK) for t in texts) == 1 and sum(t.startswith(RESTARTING) for t in texts) == 1
