"""The online move of an old state.db to the compact FTS layout, seen from outside a running daemon:
`hermes-gateway status` (over its control socket) and /metrics over HTTP."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from storage import StateStore, WriterSettings, fts_layout, ops
from tests.fakes.openai_server import FakeOpenAI

from ._proc import WAIT, free_port, run_daemon, write_home
from .test_doctor_status import cli

# Enough rows that the move outlasts the daemon's start: at least 40 steps of 128 rows, each
# after 20 ms of idle time (in a run that was measured, 256 rows were moved by the time it was ready).
MESSAGES = 5_000


async def old_layout_db(db: Path) -> None:
    """A state.db in the reference's layout: inline FTS tables, indexed by its insert triggers."""
    async with StateStore(db, writer_settings=WriterSettings(synchronous="NORMAL", index_lag_max=3600.0,
                                                             index_idle_after=3600.0)) as store:
        def write(conn: sqlite3.Connection) -> None:
            ops.create_session(conn, "old", "cli", started_at=1000.0)
            for i in range(MESSAGES):
                ops.append_message(conn, "old", ("user", "assistant")[i % 2], f"message {i} about walruses",
                                   timestamp=2000.0 + i)

        await store.write(write)
        await store.write(fts_layout.install_reference_layout)


async def metrics(port: int) -> dict[str, float]:
    async with httpx.AsyncClient() as client:
        resp = await client.get(f"http://127.0.0.1:{port}/metrics")
    assert resp.status_code == 200
    return {s.name: s.value for f in text_string_to_metric_families(resp.text) for s in f.samples
            if s.name.startswith("hermes_fts_")}


async def status(home: Path) -> tuple[dict[str, object], str]:
    as_json = await asyncio.to_thread(cli, home, "status", "--json")
    assert as_json.returncode == 0, as_json.stdout + as_json.stderr
    text = await asyncio.to_thread(cli, home, "status")
    assert text.returncode == 0, text.stdout + text.stderr
    storage = json.loads(as_json.stdout)["storage"]
    assert isinstance(storage, dict)
    return storage, text.stdout


async def test_the_layout_move_shows_in_status_and_metrics_until_it_is_done(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url)
    await old_layout_db(home / "state.db")
    with run_daemon(home, port) as d:
        await d.wait_healthy()
        # Hold the write lock from here: the move stops where it is (its steps find the file
        # locked and back off), so what status and /metrics say can be compared exactly.
        blocker = sqlite3.connect(home / "state.db", timeout=WAIT, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            storage, text = await status(home)
            conversion = storage["fts_conversion"]
            assert isinstance(conversion, dict) and conversion["total"] == MESSAGES
            done = conversion["done"]
            assert isinstance(done, int) and 0 <= done < MESSAGES
            assert f"Search index: moving to the compact layout, {done}/{MESSAGES} messages" in text
            scraped = await metrics(port)
            assert scraped["hermes_fts_conversion_ratio"] == done / MESSAGES
        finally:
            blocker.close()  # rolls back: nothing was written

        async def finished() -> None:
            while (await metrics(port))["hermes_fts_conversion_ratio"] < 1.0:
                await asyncio.sleep(0.1)

        await asyncio.wait_for(finished(), 120)
        storage, text = await status(home)
        assert storage["fts_conversion"] is None and "Search index: moving" not in text
        # Read beside the running daemon (WAL): the file is in the new layout, every message in its index.
        conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
        try:
            assert conn.execute("SELECT value FROM state_meta WHERE key = 'fts_layout'").fetchone()[0] == "external"
            hits = conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'walruses'").fetchone()[0]
            assert hits == MESSAGES
        finally:
            conn.close()
