"""A reply's outbox row commits with the agent's answer: never one without the other.

Through the real python-telegram-bot against FakeTelegram; the crash test runs
the daemon as a real process and kills it with SIGKILL.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from pathlib import Path

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.ops._proc import db_rows, free_port, run_daemon, write_home

from .conftest import run_telegram_gateway, telegram_config

WAIT = 15.0


def telegram_daemon_home(
    tmp_path: Path, fake_openai: FakeOpenAI, fake: FakeTelegram, **gateway: object
) -> tuple[Path, int, dict[str, str]]:
    """A home for a real daemon process on ``fake`` (no typing actions, no titles): home, port, env."""
    home, port = tmp_path / "h", free_port()
    write_home(home, port, fake_openai.base_url, platforms={"telegram": telegram_config(fake)},
               gateway={"typing_delay": 60, **gateway}, agent={"auto_title": False})
    return home, port, {"TELEGRAM_BOT_TOKEN": fake.token, "TELEGRAM_ALLOWED_USERS": str(fake.user["id"])}


async def test_an_answer_is_never_stored_without_its_delivery_record(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        # Another process makes the outbox refuse the next row.
        conn = sqlite3.connect(gw.db_path)
        conn.execute("CREATE TRIGGER refuse_outbox BEFORE INSERT ON gateway_outbound "
                     "BEGIN SELECT RAISE(ABORT, 'outbox refused'); END")
        conn.commit()
        await fake.user_says("will this be answered?")
        [notice] = await fake.wait_sent(1, timeout=WAIT)
        conn.execute("DROP TRIGGER refuse_outbox")
        conn.commit()
        conn.close()
        await fake.user_says("and now?")
        sent = await fake.wait_sent(2, timeout=WAIT)
    assert "rejected" in notice["rendered"] and "outbox refused" in notice["rendered"]
    assert sent[1]["rendered"] == "echo: and now?"
    # The refused answer rolled back with its outbox row: the question stays, the answer does not.
    assert db_rows(gw.db_path, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "will this be answered?"), ("user", "and now?"), ("assistant", "echo: and now?")]
    assert db_rows(gw.db_path, "SELECT text, status FROM gateway_outbound") == [("echo: and now?", "sent")]


async def test_an_answer_cut_off_by_kill_9_is_delivered_once_after_restart(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    home, port, env = telegram_daemon_home(tmp_path, fake_openai, fake)
    fake.rate_limit_next("sendMessage", retry_after=600)  # the answer is stored, its delivery waits
    with run_daemon(home, port, **env) as d:
        await d.wait_healthy()
        await fake.user_says("remember to answer me")
        await fake.wait_calls("sendMessage", timeout=WAIT)
        d.proc.send_signal(signal.SIGKILL)
        assert await d.wait_exit() == -signal.SIGKILL
    assert fake.sent == []
    assert db_rows(home / "state.db", "SELECT status FROM gateway_outbound") == [("pending",)]
    with run_daemon(home, port, **env) as d:
        await d.wait_healthy()
        [reply] = await fake.wait_sent(1, timeout=WAIT)
        await asyncio.sleep(0.5)  # a second copy, if one were coming, would be on its way by now
        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait_exit() == 0
    assert reply["rendered"].startswith("↻") and reply["rendered"].endswith("echo: remember to answer me")
    assert len(fake.sent) == 1
    assert len(fake_openai.chat_requests) == 1  # the redelivered update was not a second turn
    assert db_rows(home / "state.db", "SELECT status FROM gateway_outbound") == [("recovered",)]


async def test_a_message_in_its_lane_at_kill_9_is_answered_after_the_restart_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    # Both were taken (Telegram's offset passed them), so both were parked: the restart answers the one
    # the kill cut off from its stored question and runs the one that waited; redeliveries are duplicates.
    fake = fake_telegram
    home, port, env = telegram_daemon_home(tmp_path, fake_openai, fake, busy_ack=False)
    fake_openai.hang()  # the first turn never ends; the second message waits behind it
    with run_daemon(home, port, **env) as d:
        await d.wait_healthy()
        first = await fake.user_says("first, stored before the model saw it")
        for _ in range(500):
            if fake_openai.chat_requests:
                break
            await asyncio.sleep(0.02)
        assert fake_openai.chat_requests, "the first turn never reached the model"
        second = await fake.user_says("second, still waiting in the lane")
        await fake.wait_for(lambda: fake.acked_offset > second["update_id"], WAIT, what="the second update taken")
        d.proc.send_signal(signal.SIGKILL)
        assert await d.wait_exit() == -signal.SIGKILL
    assert db_rows(home / "state.db", "SELECT role, content FROM messages") == [
        ("user", "first, stored before the model saw it")]
    with run_daemon(home, port, **env) as d:
        await d.wait_healthy()
        replies = await fake.wait_sent(2, timeout=WAIT)
        await fake.redeliver(first)  # answered now: duplicates
        await fake.redeliver(second)
        await asyncio.sleep(0.5)  # a second reply, if one were coming, would be on its way by now
        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait_exit() == 0
    assert [r["rendered"] for r in replies] == ["echo: first, stored before the model saw it",
                                                 "echo: second, still waiting in the lane"]
    assert len(fake.sent) == 2
    assert [r[0] for r in db_rows(home / "state.db", "SELECT content FROM messages WHERE role = 'user'")] == [
        "first, stored before the model saw it", "second, still waiting in the lane"]
