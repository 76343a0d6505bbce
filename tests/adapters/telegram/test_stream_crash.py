"""kill -9 in the middle of a streamed answer, then a restart: the partial message is repaired once.

The daemon is a real process (``hermes-gateway run``) against FakeTelegram and the fake model in
this process. Two cuts: before the answer was stored (the fragment is marked as cut off, and the
question, parked until answered, is answered anew) and
after it was stored but before its last edit (the fragment becomes the answer, marked ↻).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from gateway.routing.delivery import INTERRUPTED_NOTE, RECOVERED_PREFIX
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until
from ..conftest import rows

STREAMING = {"min_chars": 10, "first_delay": 0.2, "edit_interval": 0.25}


def ledger(db: Path) -> list[tuple[str, list[str]]]:
    return [(status, json.loads(ids or "[]"))
            for status, ids in rows(db, "SELECT status, message_ids FROM gateway_outbound ORDER BY id")]


def daemon(home: Path, fake: FakeTelegram, model: FakeOpenAI) -> AbstractAsyncContextManager[subprocess.Popen[bytes]]:
    return telegram_daemon(home, fake, model, telegram={"require_mention": False}, streaming=STREAMING)


def bot_texts(fake: FakeTelegram, chat: Any) -> list[str]:
    return [m.get("text", "") for m in fake.history(chat) if m.get("from", {}).get("id") == fake.bot_id]


def edits(fake: FakeTelegram) -> int:
    return sum(1 for s in fake.sent if s["method"] == "editMessageText")


async def test_a_stream_cut_before_its_answer_was_stored_is_marked_once_after_the_restart(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    group = fake.group()
    fake_openai.tokens_per_second = 20
    fake_openai.reply(" ".join(f"slow{i}" for i in range(400)))
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: fake.connected(), "the daemon to poll", proc)
        await fake.user_says("a very long story", chat=group)
        await until(lambda: edits(fake) >= 2, "the answer streaming", proc)
        await until(lambda: any(s == "streaming" and ids for s, ids in ledger(home / "state.db")),
                    "the stream's ledger row", proc)
        proc.kill()
        assert await asyncio.to_thread(proc.wait, 30) == -9
    fragment = bot_texts(fake, group)
    assert len(fragment) == 1 and fragment[0].startswith("slow0")
    # the fragment is marked, and the question (stored, and parked until answered) is answered anew
    answered = sorted([INTERRUPTED_NOTE, "echo: a very long story"])
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: sorted(bot_texts(fake, group)) == answered, "the fragment marked, the question answered",
                    proc)
        await until(lambda: ledger(home / "state.db")[0][0] == "expired", "the row to be closed", proc)
    async with daemon(home, fake, fake_openai) as proc:  # once: a second restart changes nothing
        await until(lambda: fake.connected(), "the daemon to poll again", proc)
        await asyncio.sleep(0.5)
    assert sorted(bot_texts(fake, group)) == answered
    assert rows(home / "state.db", "SELECT content FROM messages WHERE role = 'assistant'") == [
        ("echo: a very long story",)]


async def test_a_stream_cut_after_its_answer_was_stored_becomes_that_answer_once_after_the_restart(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    group = fake.group()
    answer = " ".join(f"word{i}" for i in range(80)) + " done."
    fake_openai.tokens_per_second = 40
    fake_openai.reply(answer)
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: fake.connected(), "the daemon to poll", proc)
        await fake.user_says("a story", chat=group)
        await until(lambda: edits(fake) >= 1, "the answer streaming", proc)
        # Telegram says "wait 60 s" to the next edit: the answer is stored while its message still
        # shows a fragment, and the daemon waits to finish it.
        fake.rate_limit_chat(group, retry_after=60, times=1, methods=("editMessageText",))
        await until(lambda: rows(home / "state.db", "SELECT 1 FROM messages WHERE role = 'assistant'") != [],
                    "the answer to be stored", proc)
        await until(lambda: [s for s, _ in ledger(home / "state.db")] == ["pending"], "the reply's ledger row", proc)
        proc.kill()
        assert await asyncio.to_thread(proc.wait, 30) == -9
    fragment = bot_texts(fake, group)
    assert len(fragment) == 1 and fragment[0] != answer
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: bot_texts(fake, group) == [RECOVERED_PREFIX + answer], "the answer, recovered", proc)
        await until(lambda: ledger(home / "state.db")[0][0] == "recovered", "the row to be closed", proc)
    async with daemon(home, fake, fake_openai) as proc:
        await until(lambda: fake.connected(), "the daemon to poll again", proc)
        await asyncio.sleep(0.5)
    assert bot_texts(fake, group) == [RECOVERED_PREFIX + answer]
    assert rows(home / "state.db", "SELECT content FROM messages WHERE role = 'assistant'") == [(answer,)]
