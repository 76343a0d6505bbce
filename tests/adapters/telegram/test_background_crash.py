"""kill -9 during a background turn (/bg), then a restart: the chat hears of it exactly once.

The daemon is a real process (``hermes-gateway run``) against FakeTelegram and the fake model in this
process. Two cuts: while the model is still answering (the task is cut off: at the restart it is
marked interrupted and the chat is told so, once, through the ledger; it is not run again), and after
the answer was stored but before Telegram took it (the ledger's recovery sends it, once).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from gateway.routing.delivery import RECOVERED_PREFIX
from tests.adapters._telegram_process import telegram_daemon, until
from tests.adapters.conftest import rows
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI


def daemon(home: Path, fake: FakeTelegram, model: FakeOpenAI) -> AbstractAsyncContextManager[subprocess.Popen[bytes]]:
    return telegram_daemon(home, fake, model, telegram={"require_mention": False})


def bot_texts(fake: FakeTelegram, chat: Any) -> list[str]:
    return [str(m.get("text", "")) for m in fake.history(chat) if m.get("from", {}).get("id") == fake.bot_id]


def started_id(fake: FakeTelegram, chat: Any) -> str | None:
    for text in bot_texts(fake, chat):
        found = re.search(r"Background task ([0-9a-f]{6}) started", text)
        if found:
            return found.group(1)
    return None


def tasks(home: Path) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in rows(home / "state.db", "SELECT id, status FROM gateway_background_tasks")]


def ledger(home: Path) -> list[str]:
    return [r[0] for r in rows(home / "state.db", "SELECT status FROM gateway_outbound ORDER BY id")]


async def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    await asyncio.to_thread(proc.wait, 30)


async def test_a_background_turn_killed_before_its_answer_is_told_interrupted_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    chat = fake.private_chat()
    fake_openai.hang()  # the background turn's model call never answers
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: fake.connected, "the daemon polling", proc)
        await fake.user_says("/bg count the stars", chat=chat)
        await until(lambda: len(fake_openai.chat_requests) == 1, "the background model request", proc)
        tid = started_id(fake, chat)
        assert tid is not None
        await kill(proc)
    assert tasks(home) == [(tid, "running")]
    told = [t for t in bot_texts(fake, chat) if t.startswith(f"⚠️ Background task {tid} was cut off")]
    assert told == []
    for _ in range(2):  # a second start tells nobody again
        async with daemon(home, fake, fake_openai) as proc:
            await until(lambda: any(t.startswith(f"⚠️ Background task {tid} was cut off")
                                    for t in bot_texts(fake, chat)), "the interrupted notice", proc)
            await until(lambda: ledger(home) == ["sent"], "its ledger row sent", proc)
            await asyncio.sleep(1.0)  # nothing more comes
    told = [t for t in bot_texts(fake, chat) if t.startswith(f"⚠️ Background task {tid} was cut off")]
    assert told == [f"⚠️ Background task {tid} was cut off by a restart before it finished (count the stars). "
                    "Send /bg again to run it anew."]
    assert tasks(home) == [(tid, "interrupted")]
    assert len(fake_openai.chat_requests) == 1  # not run again
    assert not any(t.startswith("🔙") for t in bot_texts(fake, chat))


async def test_a_background_answer_stored_before_the_kill_is_delivered_once_by_recovery(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    chat = fake.private_chat()
    original = fake._handlers["sendmessage"][1]
    held: list[dict[str, Any]] = []

    async def hang_the_answer(params: dict[str, Any]) -> Any:
        if str(params.get("text")).startswith("🔙 Background task") and not held:
            held.append(params)
            await asyncio.Event().wait()  # never answers: the daemon is killed while it waits
        return original(params)

    fake.register_method("sendMessage", hang_the_answer)
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: fake.connected, "the daemon polling", proc)
        await fake.user_says("/bg name three rivers", chat=chat)
        await until(lambda: bool(held), "the background answer's send", proc)
        tid = started_id(fake, chat)
        await kill(proc)
    assert tasks(home) == [(tid, "done")]  # stored with its answer and its ledger row
    assert ledger(home) == ["pending"]
    answer = f"🔙 Background task {tid} is done:\n\necho: name three rivers"
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: any(answer in t for t in bot_texts(fake, chat)), "the recovered answer", proc)
        await until(lambda: ledger(home) == ["recovered"], "its ledger row settled", proc)
        await asyncio.sleep(1.0)
    assert [t for t in bot_texts(fake, chat) if answer in t] == [RECOVERED_PREFIX + answer]
    assert tasks(home) == [(tid, "done")]
    assert len(fake_openai.chat_requests) == 1
