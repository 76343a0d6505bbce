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


async def test_the_database_going_away_makes_readyz_503_and_a_turn_a_clear_error_then_it_recovers(
    tmp_path: Path, fake_openai: FakeOpenAI, pg_url: str, pg_server: PgServer
) -> None:
    db = pg_url.rsplit("/", 1)[1]
    async with run_gateway(tmp_path / "h", fake_openai.base_url, config={"storage": {"url": pg_url, "connect_timeout": 2}}) as gw:
        await _until(gw, 200)
        # the database refuses this gateway (as when its server is down) and drops what it had
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS false")
        pg_server.psql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'")
        body = await _until(gw, 503)
        assert body["storage"]["state"] in ("failed", "degraded")  # refused, or no connection in time
        assert pg_server.password not in str(body)
        refused = await gw.ask("are you there?")
        assert refused.status_code == 503, refused.text
        assert pg_server.password not in refused.text
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")
        await _until(gw, 200)
        fake_openai.reply("Back again.")
        resp = await gw.ask("are you there now?")
        assert resp.status_code == 200, resp.text
        assert resp.json()["choices"][0]["message"]["content"] == "Back again."


def test_doctor_checks_the_database_without_migrating_it_and_never_shows_the_password(
    tmp_path: Path, pg_server: PgServer
) -> None:
    from gateway.cli.doctor import run_checks
    from tests.gateway.conftest import write_config

    pg_server.psql("CREATE DATABASE doctor_fresh")
    home = tmp_path / "h"
    write_config(home, {"storage": {"url": pg_server.url("doctor_fresh")}})
    checks = {c.name: c for c in run_checks(home)}
    assert checks["postgresql"].level == "ok", checks["postgresql"]
    assert "migration(s) to apply at the next start" in checks["postgresql"].detail
    assert pg_server.password not in str(checks)
    assert "state.db" not in checks and "sqlite" not in checks
    assert pg_server.psql("SELECT to_regclass('sessions') IS NULL", database="doctor_fresh") == "t"
    # several nodes need one pairing key: without it in .env, doctor says what that costs
    assert checks["pairing key"].level == "warn" and "only through that node" in checks["pairing key"].detail
    (home / ".env").write_text("HERMES_PAIRING_KEY=" + "5e" * 32 + "\n")
    shared = {c.name: c for c in run_checks(home)}["pairing key"]
    assert shared.level == "ok" and "5e5e" not in str(shared)

    write_config(home, {"storage": {"url": pg_server.url("doctor_fresh").replace(pg_server.password, "wrong-pw")}})
    bad = {c.name: c for c in run_checks(home)}["postgresql"]
    assert bad.level == "fail" and "wrong-pw" not in str(bad) and pg_server.password not in str(bad)


async def test_the_command_line_reads_and_writes_the_postgres_database_without_a_daemon(
    tmp_path: Path, fake_openai: FakeOpenAI, pg_url: str, pg_server: PgServer
) -> None:
    from tests.gateway.cli.test_sessions_cli import cli

    home = tmp_path / "h"
    fake_openai.reply("Stored in PostgreSQL.")
    async with run_gateway(home, fake_openai.base_url, config={"storage": {"url": pg_url}}) as gw:
        assert (await gw.ask("remember this")).status_code == 200
    listed = cli(home, "list")
    assert listed.code == 0, listed.err
    async with PgStore(pg_url) as store:
        sid = await store.read(lambda c: c.execute("SELECT id FROM sessions").fetchone()[0])
    assert sid[:8] in listed.out
    renamed = cli(home, "rename", sid, "From the CLI")
    assert renamed.code == 0, renamed.err
    async with PgStore(pg_url) as store:
        assert await store.get_session(sid) is not None
        title = (await store.get_session(sid) or {})["title"]
    assert title == "From the CLI"
    assert pg_server.password not in listed.out + listed.err + renamed.out + renamed.err
