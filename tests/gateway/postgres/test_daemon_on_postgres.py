"""The daemon on PostgreSQL (``storage.url: postgresql://…``), against a real server: a turn is
answered and its rows land in the database, /readyz follows the database, and nothing of the
URL's password reaches the logs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from storage.postgres import PgStore
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import Running, run_gateway
from tests.pg.server import PgServer

WAIT = 30.0


async def _until(gw: Running, want: int) -> dict[str, Any]:
    async def poll() -> dict[str, Any]:
        while True:
            resp = await gw.http.get("/readyz")
            if resp.status_code == want:
                body: dict[str, Any] = resp.json()
                return body
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(poll(), WAIT)


async def test_a_turn_on_postgres_is_answered_and_stored_there(
    tmp_path: Path, fake_openai: FakeOpenAI, pg_url: str, pg_server: PgServer
) -> None:
    fake_openai.reply("Hello from a gateway on PostgreSQL.")
    async with run_gateway(tmp_path / "h", fake_openai.base_url, config={"storage": {"url": pg_url}}) as gw:
        await _until(gw, 200)
        resp = await gw.ask("hi there")
        assert resp.status_code == 200, resp.text
        assert resp.json()["choices"][0]["message"]["content"] == "Hello from a gateway on PostgreSQL."
        fake_openai.reply("And a second answer, same session.")
        second = await gw.ask("and again")
        assert second.status_code == 200, second.text
    assert not (tmp_path / "h" / "state.db").exists()  # nothing went to a SQLite file
    async with PgStore(pg_url) as store:
        rows = await store.read(lambda c: c.execute(
            "SELECT role, content FROM messages ORDER BY id").fetchall())
        sessions = await store.read(lambda c: c.execute("SELECT count(*) FROM sessions").fetchone()[0])
    assert [tuple(r) for r in rows] == [
        ("user", "hi there"), ("assistant", "Hello from a gateway on PostgreSQL."),
        ("user", "and again"), ("assistant", "And a second answer, same session."),
    ]
    assert sessions == 1
    log = (tmp_path / "h" / "logs").glob("*") if (tmp_path / "h" / "logs").exists() else []
    for path in log:
        assert pg_server.password not in path.read_text(errors="replace")
