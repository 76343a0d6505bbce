"""/healthz, /readyz and /metrics on the real daemon, with python-telegram-bot against FakeTelegram
(or only the built-in adapters where no platform matters)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.http import health
from tests.adapters.conftest import RunningTelegram, run_telegram_gateway
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import Running, free_port, run_gateway

WAIT = 20.0
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def readyz(gw: RunningTelegram | Running) -> tuple[int, dict[str, Any]]:
    resp = await gw.http.get("/readyz")
    return resp.status_code, resp.json()


async def until_ready(gw: RunningTelegram | Running, check: Callable[[int, dict[str, Any]], bool], what: str) -> dict[str, Any]:
    async def poll() -> dict[str, Any]:
        while True:
            code, body = await readyz(gw)
            if check(code, body):
                return body
            await asyncio.sleep(0.05)

    try:
        return await asyncio.wait_for(poll(), WAIT)
    except TimeoutError:
        raise AssertionError(f"/readyz never showed {what}: {await readyz(gw)}") from None


async def scrape(gw: RunningTelegram) -> Samples:
    resp = await gw.http.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(resp.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_readyz_is_ready_then_degraded_when_telegram_goes_silent_and_ready_again(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    telegram={"poll_timeout": 1, "watchdog_grace": 0.5}) as gw:
        body = await until_ready(gw, lambda code, b: code == 200, "ready")
        assert body["status"] == "ready" and (body["storage"]["state"], body["storage"]["reason"]) == ("live", None)
        assert {"api-server", "telegram"} <= set(body["adapters"])
        assert all(a == {"state": "live", "reason": None} for a in body["adapters"].values())
        assert (await gw.http.get("/healthz")).status_code == 200
        reconnects_before = value(await scrape(gw), "hermes_adapter_reconnects_total", adapter="telegram")

        fake.hang_polls()  # getUpdates goes silent; sendMessage etc. still answer
        body = await until_ready(gw, lambda code, b: b["adapters"]["telegram"]["state"] == "degraded", "degraded")
        assert body["status"] == "not_ready"
        assert "getUpdates" in body["adapters"]["telegram"]["reason"]
        assert body["adapters"]["api-server"]["state"] == "live"
        assert (await readyz(gw))[0] == 503
        # Liveness is not readiness: the process is alive and its loop answers, so a container
        # health check must not restart it for a platform's outage.
        live = await gw.http.get("/healthz")
        assert live.status_code == 200 and live.json()["status"] == "ok"
        assert "queue_depth" in live.json()["storage"]

        fake.release_polls()
        body = await until_ready(gw, lambda code, b: code == 200, "ready again")
        assert body["adapters"]["telegram"] == {"state": "live", "reason": None}
        reconnects_after = value(await scrape(gw), "hermes_adapter_reconnects_total", adapter="telegram")
        assert reconnects_after > reconnects_before

        # And it really hears users again.
        await fake.user_says("back?")
        sent = await fake.wait_sent(1, timeout=WAIT)
        assert sent[-1]["rendered"] == "echo: back?"


async def test_readyz_reports_storage_that_cannot_take_a_write(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    async with run_telegram_gateway(tmp_path / "h", fake_telegram, fake_openai.base_url,
                                    config={"storage": {"busy_retry_budget": 0.3}}) as gw:
        await until_ready(gw, lambda code, b: code == 200, "ready")
        # Another process holds state.db's write lock (as a stray sqlite3 shell would).
        other = sqlite3.connect(gw.db_path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            # The last probe's answer is reused for a moment (STORAGE_PROBE_TTL); the next one sees the lock.
            body = await until_ready(gw, lambda code, b: code == 503, "not ready while the lock is held")
            assert body["storage"]["state"] in ("degraded", "failed") and body["storage"]["reason"]
        finally:
            other.execute("ROLLBACK")
            other.close()
        await until_ready(gw, lambda code, b: code == 200, "ready after the lock is gone")
        busy = value(await scrape(gw), "hermes_writer_busy_retries_total")
        assert busy > 0


async def test_metrics_parse_and_move_with_traffic(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    home = tmp_path / "h"
    async with run_telegram_gateway(home, fake, fake_openai.base_url) as gw:
        before = await scrape(gw)
        assert value(before, "hermes_messages_in_total", platform="telegram") == 0
        assert value(before, "hermes_turn_seconds_count") == 0
        for name in ("hermes_writer_queue_depth", "hermes_wal_bytes", "hermes_turns_running"):
            assert (name, ()) in before, name

        await fake.user_says("first")
        await fake.wait_sent(1, timeout=WAIT)
        # Three messages behind a slow turn: the lane has a queue while it runs.
        fake_openai.delay(1.5)
        for text in ("slow", "queued one", "queued two"):
            await fake.user_says(text)

        async def lane_has_queue() -> Samples:
            while True:
                s = await scrape(gw)
                if any(k[0] == "hermes_lane_queue_depth" and v > 0 for k, v in s.items()):
                    return s
                await asyncio.sleep(0.02)

        during = await asyncio.wait_for(lane_has_queue(), WAIT)
        uid = str(fake.user["id"])  # in a DM, also the chat id
        # Lanes are ranked, never named: a scrape must not carry chat or user ids.
        assert value(during, "hermes_lane_queue_depth", rank="1") >= 1
        assert value(during, "hermes_lanes_queued") == 1
        labels = {v for _, pairs in during for _, v in pairs}
        assert not any(uid in v or "agent:main" in v for v in labels), labels
        raw = (await gw.http.get("/metrics")).text
        assert uid not in raw and "agent:main" not in raw
        await fake.wait_sent(4, timeout=WAIT, match=lambda m: "echo:" in m.get("rendered", ""))

        async def all_counted() -> Samples:
            # A send is counted when the platform's answer is back, just after the fake saw it.
            while value(s := await scrape(gw), "hermes_messages_out_total", platform="telegram") < 4:
                await asyncio.sleep(0.02)
            return s

        after = await asyncio.wait_for(all_counted(), WAIT)

    assert value(after, "hermes_messages_in_total", platform="telegram") == 4
    assert value(after, "hermes_messages_out_total", platform="telegram") >= 4
    assert value(after, "hermes_turn_seconds_count") == 4
    assert value(after, "hermes_turn_seconds_bucket", le="+Inf") == 4
    assert value(after, "hermes_turn_seconds_sum") >= 1.5
    assert value(after, "hermes_writer_commits_total") > value(before, "hermes_writer_commits_total")
    assert value(after, "hermes_writer_batch_size", stat="max") >= 1
    assert value(after, "hermes_writer_commit_seconds", stat="p50") > 0
    assert ("hermes_writer_checkpoints_total", (("mode", "PASSIVE"),)) in after
    assert value(after, "hermes_adapter_up", adapter="telegram") == 1
    assert ("hermes_adapter_reconnects_total", (("adapter", "telegram"),)) in after
    # Every platform's series exists from the start (at 0): nothing was re-sent in this run.
    assert after[("hermes_deliveries_retried_total", (("platform", "telegram"),))] == 0
    assert after[("hermes_send_failures_total", (("platform", "telegram"),))] == 0
    assert before[("hermes_messages_in_total", (("platform", "api-server"),))] == 0


async def test_deliveries_retried_counts_replies_resent_after_a_restart(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    home = tmp_path / "h"
    async with run_telegram_gateway(home, fake, fake_openai.base_url):
        pass
    # A reply the previous process recorded but was cut off before sending (as after kill -9).
    conn = sqlite3.connect(home / "state.db")
    with conn:
        conn.execute("INSERT INTO gateway_outbound (platform, chat_id, text, created_at) VALUES (?, ?, ?, ?)",
                     ("telegram", str(fake.user["id"]), "the lost reply", time.time()))
    conn.close()
    async with run_telegram_gateway(home, fake, fake_openai.base_url) as gw:
        sent = await fake.wait_sent(1, timeout=WAIT, match=lambda m: "the lost reply" in m.get("text", ""))
        assert sent

        async def counted() -> Samples:
            # The ledger is updated (and the counter moved) just after the send the fake saw.
            while value(s := await scrape(gw), "hermes_deliveries_retried_total", platform="telegram") < 1:
                await asyncio.sleep(0.02)
            return s

        samples = await asyncio.wait_for(counted(), WAIT)
    assert value(samples, "hermes_deliveries_retried_total", platform="telegram") == 1
    assert value(samples, "hermes_messages_out_total", platform="telegram") == 1


# ------------------------------------------------------------ the storage probe and the bearer key


async def test_readyz_reuses_its_storage_probe_instead_of_writing_per_request(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with run_gateway(tmp_path / "h", fake_openai.base_url) as gw:
        await until_ready(gw, lambda code, b: code == 200, "ready")
        # Reused for as long as the test runs: a flood of requests shares one probe (one write).
        monkeypatch.setattr(health, "STORAGE_PROBE_TTL", 3600.0)
        answers = await asyncio.gather(*(gw.http.get("/readyz") for _ in range(50)))
        assert {r.status_code for r in answers} == {200}
        assert len({r.json()["storage"]["checked_at"] for r in answers}) == 1
        # Never reused: each request probes anew (so the check above could have failed).
        monkeypatch.setattr(health, "STORAGE_PROBE_TTL", 0.0)
        checks = [(await gw.http.get("/readyz")).json()["storage"]["checked_at"] for _ in range(5)]
        assert len(set(checks)) == 5


KEY = "test-api-key-0123456789abcdef"


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
async def test_readyz_and_metrics_need_the_key_beyond_loopback_healthz_never(
    tmp_path: Path, fake_openai: FakeOpenAI, host: str
) -> None:
    config = {"platforms": {"api_server": {"host": host, "port": free_port()}}}
    async with run_gateway(tmp_path / "h", fake_openai.base_url, config=config,
                           env={"API_SERVER_KEY": KEY, "TESTCHAT_ALLOWED_USERS": "u1"}) as gw:
        await gw.chat.say("hello", user="u1")
        await gw.chat.wait_sent(1, chat="u1", timeout=WAIT)
        guarded = host != "127.0.0.1"
        good = {"Authorization": f"Bearer {KEY}"}
        for path in ("/readyz", "/metrics"):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
                resp = await gw.http.get(path, headers=headers)
                assert (resp.status_code == 401) is guarded, (path, headers, resp.status_code)
                if guarded:
                    assert resp.headers["WWW-Authenticate"] == "Bearer" and KEY not in resp.text
            assert (await gw.http.get(path, headers=good)).status_code == 200
        # A container health check has no key: /healthz answers anyone, and says nothing private.
        live = await gw.http.get("/healthz")
        assert live.status_code == 200 and live.json()["status"] == "ok"
        assert KEY not in live.text and "u1" not in live.text and "agent:main" not in live.text
