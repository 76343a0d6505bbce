"""/healthz, /readyz and /metrics on the real daemon, with python-telegram-bot against FakeTelegram."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.adapters.conftest import RunningTelegram, run_telegram_gateway
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

WAIT = 20.0
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def readyz(gw: RunningTelegram) -> tuple[int, dict[str, Any]]:
    resp = await gw.http.get("/readyz")
    return resp.status_code, resp.json()


async def until_ready(gw: RunningTelegram, check: Callable[[int, dict[str, Any]], bool], what: str) -> dict[str, Any]:
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
        assert body["status"] == "ready" and body["storage"] == {"state": "live", "reason": None}
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
        # Liveness is not readiness: the process is alive, its loop answers, the writer works.
        health = (await gw.http.get("/healthz")).json()
        assert health["status"] in ("ok", "degraded") and "queue_depth" in health["storage"]

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
            code, body = await readyz(gw)
            assert code == 503
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
        uid = str(fake.user["id"])
        assert value(during, "hermes_lane_queue_depth", lane=f"agent:main:telegram:dm:{uid}") >= 1
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
    assert ("hermes_deliveries_retried_total", ()) not in after  # labelled only: nothing retried yet


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
