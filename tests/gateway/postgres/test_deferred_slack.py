"""Slack events that meet the database away (issue 26): not acknowledged until stored.

The daemon on a real PostgreSQL server whose database refuses it, Slack's Events API (HTTP) or
Socket Mode against FakeSlack, which retries an unacknowledged event as Slack does (3 times;
the pauses are the test's, ``retry_now()`` ends one). A message the router defers gets no notice
and is not acknowledged; once the database is back, Slack's retry is answered exactly once. Slack's
last retry gets the notice instead of silence. A retry that comes while the first dispatch still
waits for the database joins it (one dispatch, one deferral), rather than running it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from gateway.daemon.runner import Gateway
from storage.postgres import PgStore
from tests.adapters.conftest import daemon_config, serve_gateway
from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port
from tests.pg.server import PgServer

from .test_deferred_updates import WAIT, _refuse, _until

FAILED = "could not be handled"
DM = "D0DM0001"
ACKED = (200, "acked")
#: no pause before Slack's first retry; the later ones wait for ``retry_now()``
HELD = (0.0, 3600.0, 3600.0)
MODES = pytest.mark.parametrize("mode", ["http", "socket"])


@asynccontextmanager
async def slack_on_pg(home: Path, fake: FakeSlack, model_url: str, pg_url: str, mode: str,
                      connect_timeout: int = 2) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    port = free_port()
    section = {"api_base_url": fake.api_base_url, "mode": mode, "ping_interval": 0.5, "thinking_placeholder": False}
    # the Socket Mode connection is a cluster role: held for the whole test while the database is away
    cfg = daemon_config(model_url, port, "slack", section, None,
                        {"storage": {"url": pg_url, "connect_timeout": connect_timeout}, "cluster": {"failover_s": 300}})
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
           "SLACK_ALLOWED_USERS": fake.user}
    if mode == "http":
        fake.events_url = f"http://127.0.0.1:{port}/slack/events"
    async with serve_gateway(home, cfg, env, "slack", ("connected",)) as (gw, http):
        await _ready(http, 200)
        yield gw, http


async def _ready(http: httpx.AsyncClient, want: int) -> None:
    async def poll() -> None:
        while (await http.get("/readyz")).status_code != want:
            await asyncio.sleep(0.1)

    await asyncio.wait_for(poll(), WAIT)


def _outcomes(fake: FakeSlack, body: dict[str, Any]) -> list[Any]:
    return [d["outcome"] for d in fake.deliveries_of(body["event_id"])]


def _failed(fake: FakeSlack, body: dict[str, Any], n: int) -> Callable[[], bool]:
    """The first ``n`` deliveries of ``body`` came back unacknowledged."""
    def check() -> bool:
        got = _outcomes(fake, body)[:n]
        return len(got) == n and all(o is not None and o not in ACKED for o in got)

    return check


def _notices(fake: FakeSlack) -> list[Any]:
    return [m for m in fake.sent if FAILED in str(m.get("text"))]


async def _questions(pg_url: str) -> list[str]:
    async with PgStore(pg_url) as store:
        rows = await store.read(lambda c: c.execute(
            "SELECT content FROM messages WHERE role = 'user' ORDER BY id").fetchall())
    return [r[0] for r in rows]


async def _answered_once_when_back(http: httpx.AsyncClient, fake: FakeSlack, fake_openai: FakeOpenAI, pg_server: PgServer,
                                   db: str, body: dict[str, Any]) -> None:
    """The database comes back, Slack's next retry is answered, once; a later message proves no
    second answer is on its way (one chat is answered in order)."""
    fake_openai.reply("Here now and answered once")
    pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")
    # Slack's next retry comes a minute or five later: by then the gateway has its database again
    await _ready(http, 200)
    fake.retry_now()
    await fake.wait_reply(DM, None, text="Here now and answered once", timeout=WAIT)
    await _until(lambda: _outcomes(fake, body)[-1] in ACKED)
    # Slack retries the marker too if its delivery finds no socket (a reconnect on a loaded machine:
    # pings every 0.5 s here); its retry comes at once instead of after the held pauses.
    fake.retry_delays = (0.0, 0.5, 0.5)
    await fake.user_says("marker")
    await fake.wait_reply(DM, None, text="echo: marker", timeout=WAIT)
    texts = [m["text"] for m in fake.thread_replies(DM, None)]
    assert texts.count("Here now and answered once") == 1, texts
    assert not _notices(fake), texts
    assert not fake.events_given_up


@MODES
async def test_a_slack_message_that_meets_the_database_away_is_answered_once_when_it_is_back(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, pg_url: str, pg_server: PgServer, mode: str
) -> None:
    fake, db = fake_slack, pg_url.rsplit("/", 1)[1]
    fake.retry_delays = HELD
    async with slack_on_pg(tmp_path / "h", fake, fake_openai.base_url, pg_url, mode) as (gw, http):
        services = gw.services
        assert services is not None
        _refuse(pg_server, db)
        body = await fake.user_says("are you there?")
        key = f"{DM}:{body['event']['ts']}"
        # the delivery and Slack's first retry are not acknowledged, and the router let the message go
        await _until(lambda: _failed(fake, body, 2)() and not services.dedupe.in_flight("slack", key))
        assert not _notices(fake)
        assert len(fake.deliveries_of(body["event_id"])) == 2  # the next retry waits for retry_now()
        await _answered_once_when_back(http, fake, fake_openai, pg_server, db, body)
    assert await _questions(pg_url) == ["are you there?", "marker"]


@MODES
async def test_slacks_last_retry_that_meets_the_database_away_gets_the_notice(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, pg_url: str, pg_server: PgServer, mode: str
) -> None:
    fake, db = fake_slack, pg_url.rsplit("/", 1)[1]
    fake.retry_delays = (0.0, 0.0, 0.0)
    async with slack_on_pg(tmp_path / "h", fake, fake_openai.base_url, pg_url, mode):
        _refuse(pg_server, db)
        body = await fake.user_says("are you there?")
        await fake.wait_sent(1, timeout=WAIT, match=lambda m: FAILED in str(m.get("text")))
        await _until(lambda: len(_outcomes(fake, body)) == 4 and _outcomes(fake, body)[-1] is not None)
        deliveries = fake.deliveries_of(body["event_id"])
        assert [d["retry"] for d in deliveries] == [0, 1, 2, 3]
        assert _failed(fake, body, 3)() and deliveries[3]["outcome"] in ACKED  # the notice answered it
        assert len(_notices(fake)) == 1
        assert not fake.events_given_up
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")


@MODES
async def test_a_retry_while_the_dispatch_still_waits_for_the_database_joins_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, pg_url: str, pg_server: PgServer, mode: str
) -> None:
    fake, db = fake_slack, pg_url.rsplit("/", 1)[1]
    fake.retry_delays = HELD
    # the router waits for a connection up to the pool's timeout (10 s, the default): longer than the
    # bound of the delivery (2.5 s) and of Slack's immediate retry, so both meet the dispatch running
    async with slack_on_pg(tmp_path / "h", fake, fake_openai.base_url, pg_url, mode, connect_timeout=10) as (gw, http):
        services = gw.services
        assert services is not None
        with capture_logs() as logs:
            _refuse(pg_server, db)
            body = await fake.user_says("are you there?")
            key = f"{DM}:{body['event']['ts']}"
            await _until(lambda: services.dedupe.in_flight("slack", key))
            await _until(_failed(fake, body, 2))
            assert services.dedupe.in_flight("slack", key)  # both answered while it still ran
            await _until(lambda: not services.dedupe.in_flight("slack", key))
            assert not _notices(fake)
            await _answered_once_when_back(http, fake, fake_openai, pg_server, db, body)
        deferred = [e for e in logs if e["event"] == "router.deferred"]
        assert len(deferred) == 1, deferred  # one dispatch for both deliveries, none after it
    assert await _questions(pg_url) == ["are you there?", "marker"]


@MODES
async def test_slacks_last_retry_while_the_dispatch_still_waits_gets_the_notice_once_it_is_deferred(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, pg_url: str, pg_server: PgServer, mode: str
) -> None:
    fake, db = fake_slack, pg_url.rsplit("/", 1)[1]
    fake.retry_delays = (0.0, 0.0, 0.0)
    # the router waits up to 20 s for a connection: all of Slack's retries meet the first dispatch
    # still running, and nothing would bring the message again once it is deferred
    async with slack_on_pg(tmp_path / "h", fake, fake_openai.base_url, pg_url, mode, connect_timeout=20) as (gw, _):
        services = gw.services
        assert services is not None
        with capture_logs() as logs:
            _refuse(pg_server, db)
            body = await fake.user_says("are you there?")
            key = f"{DM}:{body['event']['ts']}"
            await _until(lambda: body["event_id"] in fake.events_given_up)
            assert services.dedupe.in_flight("slack", key) and not _notices(fake)  # still the first dispatch
            await fake.wait_sent(1, timeout=WAIT, match=lambda m: FAILED in str(m.get("text")))
        assert [d["retry"] for d in fake.deliveries_of(body["event_id"])] == [0, 1, 2, 3]
        assert len([e for e in logs if e["event"] == "router.deferred"]) == 1
        assert len(_notices(fake)) == 1
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")
