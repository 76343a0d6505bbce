"""Telegram updates that meet the database away (issue 26): not acknowledged until stored.

A polling daemon on a real PostgreSQL server whose database refuses it: the router defers the
message (``Disposition.DEFERRED``), nobody gets an error notice, the update stays with Telegram
(the emulator) and is asked for again, with pauses (not a spin); once the database is back it is
answered exactly once. The webhook answers such an update 503, and Telegram posts it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from storage.postgres import PgStore
from tests.adapters.conftest import RunningTelegram, run_telegram_gateway
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.pg.server import PgServer

WAIT = 60.0
FAILED = "could not be handled"
ALBUM_ANSWER = "Two pictures and answered once"  # the model cannot see them: a note follows
SECRET = "s3cret-Token_for-the-webhook-0123456789"


async def _readyz(gw: RunningTelegram, want: int) -> None:
    async def poll() -> None:
        while (await gw.http.get("/readyz")).status_code != want:
            await asyncio.sleep(0.1)

    await asyncio.wait_for(poll(), WAIT)


def _refuse(pg_server: PgServer, db: str) -> None:
    """The database refuses this gateway (as when its server is down) and drops what it had."""
    pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS false")
    pg_server.psql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'")


async def _until(check: Callable[[], bool]) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), WAIT)


async def test_an_update_that_meets_the_database_away_is_answered_once_when_it_is_back(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str, pg_server: PgServer
) -> None:
    fake, db = fake_telegram, pg_url.rsplit("/", 1)[1]
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    config={"storage": {"url": pg_url, "connect_timeout": 2}}) as gw:
        await _readyz(gw, 200)
        services = gw.gateway.services
        assert services is not None
        _refuse(pg_server, db)
        # the poller is parked in a long poll: it takes the update at once, before this node
        # notices the database is away (and gives up its telegram role until it is back)
        update = await fake.user_says("are you there?")
        uid = update["update_id"]
        key = f"update:{uid}"
        await _until(lambda: services.dedupe.in_flight("telegram", key))
        polls_before = len(fake.calls_to("getUpdates"))
        # the router waits for a connection, then gives up: deferred, its claim released
        await _until(lambda: not services.dedupe.in_flight("telegram", key))
        await _readyz(gw, 503)
        assert fake.acked_offset <= uid  # still Telegram's: not acknowledged, not even at the disconnect
        assert not [m for m in fake.sent if FAILED in (m.get("text") or "")]

        fake_openai.reply("Here now and answered once")
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")
        await fake.wait_sent(1, timeout=WAIT, match=lambda m: m["text"] == "Here now and answered once")
        # while away: a bound in calls (a spin makes hundreds, a poll every few seconds a handful)
        away = len(fake.calls_to("getUpdates")) - polls_before
        assert away <= 25, f"{away} getUpdates while the database was away: a spin"
        # acknowledged at last, then one more poll: a second answer would have been sent by now
        acked = len(fake.calls_to("getUpdates"))
        await _until(lambda: fake.acked_offset > uid)
        await fake.wait_calls("getUpdates", n=acked + 1, timeout=WAIT)
        texts = [m.get("text") for m in fake.sent]
        assert texts.count("Here now and answered once") == 1, texts
        assert not [t for t in texts if FAILED in (t or "")], texts
    async with PgStore(pg_url) as store:
        questions = await store.read(lambda c: c.execute(
            "SELECT content FROM messages WHERE role = 'user'").fetchall())
    assert [tuple(r) for r in questions] == [("are you there?",)]


async def test_a_webhook_update_that_meets_the_database_away_is_refused_503_and_posted_again(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str, pg_server: PgServer
) -> None:
    from tests.gateway.conftest import free_port

    fake, db, port = fake_telegram, pg_url.rsplit("/", 1)[1], free_port()
    # Telegram goes on retrying a webhook for hours; the emulator for a minute here
    fake.webhook_retry_delays = (1.0,) * 60
    fake.webhook_timeout = 40.0
    # the router waits for a connection (the pool's 10 s, as long as dispatch_wait) before it can
    # defer: a 503 either way, and a retry meanwhile joins the dispatch under way
    webhook = {"mode": "webhook", "webhook_url": f"http://127.0.0.1:{port}/telegram/webhook"}
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, port=port, telegram=webhook,
                                    env={"TELEGRAM_WEBHOOK_SECRET": SECRET},
                                    config={"storage": {"url": pg_url, "connect_timeout": 2}}) as gw:
        await _readyz(gw, 200)
        _refuse(pg_server, db)
        update = await fake.user_says("are you there?")
        uid = update["update_id"]

        def attempts(status: int) -> list[dict[str, Any]]:
            return [d for d in fake.webhook_deliveries if d["update_id"] == uid and d["status"] == status]

        await _until(lambda: bool(attempts(503)))
        assert not [m for m in fake.sent if FAILED in (m.get("text") or "")]
        fake_openai.reply("Here now and answered once")
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")
        await fake.wait_sent(1, timeout=WAIT, match=lambda m: m["text"] == "Here now and answered once")
        await _until(lambda: bool(attempts(200)))
        texts = [m.get("text") for m in fake.sent]
        assert texts.count("Here now and answered once") == 1, texts
        assert not [t for t in texts if FAILED in (t or "")], texts
        assert not fake.webhook_dropped


async def test_an_album_that_meets_the_database_away_is_collected_again_and_answered_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str, pg_server: PgServer
) -> None:
    from tests.adapters.telegram._media import jpeg

    fake, db = fake_telegram, pg_url.rsplit("/", 1)[1]
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    config={"storage": {"url": pg_url, "connect_timeout": 2}}) as gw:
        await _readyz(gw, 200)
        services = gw.gateway.services
        assert services is not None
        _refuse(pg_server, db)
        parts = await fake.user_sends_album([fake.photo(jpeg(40, 30)), fake.photo(jpeg(30, 40, 9))],
                                            caption="both of these?")
        first = parts[0]["update_id"]
        group = parts[0]["message"]["media_group_id"]
        key = f"album:{parts[0]['message']['chat']['id']}:{group}"
        await _until(lambda: services.dedupe.in_flight("telegram", key))
        await _until(lambda: not services.dedupe.in_flight("telegram", key))  # deferred
        await _readyz(gw, 503)
        assert fake.acked_offset <= first  # neither part acknowledged
        fake_openai.reply(ALBUM_ANSWER)
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")
        await fake.wait_sent(1, timeout=WAIT, match=lambda m: str(m.get("text")).startswith(ALBUM_ANSWER))
        acked = len(fake.calls_to("getUpdates"))
        await _until(lambda: fake.acked_offset > parts[-1]["update_id"])
        await fake.wait_calls("getUpdates", n=acked + 1, timeout=WAIT)
        texts = [m.get("text") for m in fake.sent]
        assert len([t for t in texts if str(t).startswith(ALBUM_ANSWER)]) == 1, texts
        assert not [t for t in texts if FAILED in (t or "")], texts
    async with PgStore(pg_url) as store:
        questions = await store.read(lambda c: c.execute(
            "SELECT content FROM messages WHERE role = 'user'").fetchall())
    assert len(questions) == 1 and str(questions[0][0]).startswith("both of these?"), questions
