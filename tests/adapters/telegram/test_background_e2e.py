"""/bg on Telegram: a background turn in a session of its own while the chat stays free, listed,
limited, stopped; the real daemon and python-telegram-bot against ``FakeTelegram``, ``FakeOpenAI``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from ..conftest import rows, run_telegram_gateway

WAIT = 15.0


def bot_texts(fake: FakeTelegram) -> list[str]:
    return [str(m.get("text", "")) for m in fake.history(fake.user["id"]) if m.get("from", {}).get("id") == fake.bot_id]


async def say(fake: FakeTelegram, text: str) -> str:
    """Send ``text``; the bot's next message."""
    before = len(bot_texts(fake))
    await fake.user_says(text)
    await fake.wait_for(lambda: len(bot_texts(fake)) > before, WAIT, what=f"an answer to {text!r}")
    return bot_texts(fake)[before]


def task_id(reply: str) -> str:
    found = re.search(r"Background task ([0-9a-f]{6}) started", reply)
    assert found, reply
    return found.group(1)


def asks(words: str) -> Any:
    return lambda body: words in str(body.get("messages"))


async def test_a_background_turn_answers_later_while_the_chat_stays_free(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    key = f"agent:main:telegram:dm:{fake.user['id']}"
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        db = gw.db_path
        hold = fake_openai.hold_when(asks("research llamas"))
        tid = task_id(await say(fake, "/bg research llamas"))
        await hold.arrived.wait()
        assert await say(fake, "hi meanwhile") == "echo: hi meanwhile"  # the chat's own lane is free
        listing = await say(fake, "/bg")
        assert f"• {tid} — research llamas" in listing and "1 of at most 3" in listing
        hold.release.set()
        done = f"🔙 Background task {tid} is done:\n\necho: research llamas"
        await fake.wait_for(lambda: done in bot_texts(fake), WAIT, what="the background answer")
        assert bot_texts(fake).count(done) == 1
        # its own session, which the chat may /resume; the chat's session has only its own exchange
        bg_session = rows(db, "SELECT session_id, status FROM gateway_background_tasks WHERE id = ?", tid)
        assert bg_session[0][1] == "done"
        assert [r[0] for r in rows(db, "SELECT content FROM messages WHERE session_id = ? ORDER BY id",
                                   bg_session[0][0])] == ["research llamas", "echo: research llamas"]
        chat_session = rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)[0][0]
        assert [r[0] for r in rows(db, "SELECT content FROM messages WHERE session_id = ? ORDER BY id",
                                   chat_session)] == ["hi meanwhile", "echo: hi meanwhile"]
        assert rows(db, "SELECT COUNT(*) FROM gateway_session_bindings WHERE session_key = ? AND session_id = ?",
                    key, bg_session[0][0]) == [(1,)]
        await fake.wait_for(lambda: rows(db, "SELECT status FROM gateway_outbound WHERE text LIKE '%llamas%'")
                            == [("sent",)], WAIT, what="its ledger row marked sent")
        assert (await say(fake, "/bg")).startswith("No background task runs in this chat.")


async def test_bg_limit_stop_and_bad_input(tmp_path: Path, fake_openai: FakeOpenAI,
                                           fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    config={"gateway": {"max_background": 2}}) as gw:
        holds = [fake_openai.hold_when(asks(f"job {n}")) for n in (1, 2)]
        first = task_id(await say(fake, "/bg job 1"))
        second = task_id(await say(fake, "/bg job 2"))
        for hold in holds:
            await hold.arrived.wait()
        refused = await say(fake, "/bg job 3")
        assert refused.startswith("⏳ 2 background tasks already run in this chat, the most there may be.")
        assert len(fake_openai.chat_requests) == 2  # the third never reached the model
        assert (await say(fake, "/stop nope")).startswith("No background task 'nope' runs in this chat.")
        assert (await say(fake, f"/stop {first}")).startswith(f"⚡ Background task {first} stopped.")
        third = task_id(await say(fake, "/bg job 3"))  # room again
        for hold in holds:
            hold.release.set()
        done = [f"🔙 Background task {t} is done:\n\necho: job {n}" for t, n in ((second, 2), (third, 3))]
        await fake.wait_for(lambda: all(d in bot_texts(fake) for d in done), WAIT, what="the two answers")
        assert not any(t.startswith(f"🔙 Background task {first}") for t in bot_texts(fake))
        assert sorted(rows(gw.db_path, "SELECT id, status FROM gateway_background_tasks")) == sorted(
            [(first, "stopped"), (second, "done"), (third, "done")])
        assert (await say(fake, f"/stop {first}")).startswith(f"No background task '{first}' runs")
        # /stop alone still stops the chat's own turn
        assert await say(fake, "/stop") == "Nothing is running in this chat."


async def test_a_failed_background_turn_says_so(tmp_path: Path, fake_openai: FakeOpenAI,
                                                fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        fake_openai.fail(400)
        tid = task_id(await say(fake, "/bg doomed"))
        await fake.wait_for(lambda: any(t.startswith(f"⚠️ Background task {tid} failed:") for t in bot_texts(fake)),
                            WAIT, what="the failure notice")
        assert rows(gw.db_path, "SELECT status FROM gateway_background_tasks") == [("failed",)]


async def test_bg_off(tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    config={"gateway": {"max_background": 0}}):
        assert (await say(fake, "/bg anything")).startswith("Background tasks are switched off")


async def test_a_task_stopped_before_it_got_a_turn_slot_never_runs(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    config={"gateway": {"max_concurrent_turns": 1}}) as gw:
        hold = fake_openai.hold_when(asks("the long one"))
        await fake.user_says("the long one")
        await hold.arrived.wait()  # the one turn slot is taken
        tid = task_id(await say(fake, "/bg waits for a slot"))
        assert f"• {tid} — waits for a slot" in await say(fake, "/bg")
        assert (await say(fake, f"/stop {tid}")).startswith(f"⚡ Background task {tid} stopped.")
        hold.release.set()
        await fake.wait_for(lambda: "echo: the long one" in bot_texts(fake), WAIT, what="the chat's answer")
        assert await say(fake, "after") == "echo: after"  # the slot is free again; the task never took it
        assert [r.body["messages"][-1]["content"] for r in fake_openai.chat_requests] == ["the long one", "after"]
        assert rows(gw.db_path, "SELECT status, session_id FROM gateway_background_tasks") == [("stopped", None)]
