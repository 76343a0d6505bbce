"""PgStore against a real PostgreSQL 15 server: migrations, transactions, errors, redaction."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg import errors as pg_errors

from storage import SchemaError, StorageUnavailableError, StorageURLError, parse_storage_url
from storage.postgres import PgStore, applied_versions, latest_pg_version, load_migrations
from tests.pg.server import PgServer


async def test_open_migrates_a_fresh_database_once_even_when_nodes_start_together(pg_server: PgServer) -> None:
    pg_server.psql("CREATE DATABASE fresh_nodes")
    url = pg_server.url("fresh_nodes")
    stores = [PgStore(url, max_size=2) for _ in range(3)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        applied = [s.migrated for s in stores]
        # exactly one node applied the migrations; the others found them done
        every = [m.version for m in load_migrations()]
        assert sorted(len(a) for a in applied) == [0, 0, len(every)]
        versions = await stores[0].read(applied_versions)
        assert versions == every and versions[-1] == latest_pg_version()
        assert await stores[1].read(lambda c: _one(c, "SELECT version FROM schema_version")) == 11
    finally:
        await asyncio.gather(*(s.close() for s in stores))


async def test_a_failed_write_rolls_back_everything_it_did(pg_url: str) -> None:
    async with PgStore(pg_url) as store:
        def half(conn: psycopg.Connection) -> None:
            conn.execute("INSERT INTO state_meta (key, value) VALUES ('a', '1')")
            conn.execute("INSERT INTO state_meta (key, value) VALUES ('a', '2')")  # unique violation

        with pytest.raises(pg_errors.UniqueViolation):
            await store.write(half)
        assert await store.read(lambda c: _one(c, "SELECT count(*) FROM state_meta WHERE key = 'a'")) == 0


async def test_reads_cannot_write(pg_url: str) -> None:
    async with PgStore(pg_url) as store:
        with pytest.raises(pg_errors.ReadOnlySqlTransaction):
            await store.read(lambda c: c.execute("INSERT INTO state_meta (key, value) VALUES ('x', 'y')"))


async def test_a_newer_database_is_refused(pg_url: str) -> None:
    async with PgStore(pg_url) as store:
        await store.write(lambda c: c.execute(
            "INSERT INTO hermes_migrations (version, name, checksum) VALUES (9999, 'future', 'x')"
        ))
    with pytest.raises(SchemaError, match="newer hermes-gateway"):
        await PgStore(pg_url).open()


async def test_unreachable_and_wrong_password_are_clear_and_never_show_the_password(pg_server: PgServer) -> None:
    wrong = pg_server.url().replace(pg_server.password, "not-the-password-xyz")
    with pytest.raises(StorageUnavailableError) as refused:
        await PgStore(wrong, connect_timeout=5).open()
    assert "not-the-password-xyz" not in str(refused.value)
    assert "***" in str(refused.value)

    closed_port = f"postgresql://hermes:secret-pw@127.0.0.1:{_closed_port()}/db"
    with pytest.raises(StorageUnavailableError) as down:
        await PgStore(closed_port, connect_timeout=5).open()
    assert "secret-pw" not in str(down.value)


async def test_a_server_restart_is_a_clear_error_then_the_pool_recovers(pg_server: PgServer, pg_url: str) -> None:
    async with PgStore(pg_url, max_size=2) as store:
        assert await store.healthy()
        pg_server.restart()
        # the pooled connections died with the server: found dead before the transaction began,
        # they are replaced, and the write goes through on a fresh one
        await store.write(lambda c: c.execute("INSERT INTO state_meta VALUES ('after', 'restart')"))
        assert await store.read(lambda c: _one(c, "SELECT value FROM state_meta WHERE key = 'after'")) == "restart"
        assert await store.healthy()


async def test_a_restart_with_every_pooled_connection_idle_costs_no_transaction(pg_server: PgServer, pg_url: str) -> None:
    async with PgStore(pg_url, max_size=8) as store:
        await asyncio.gather(*(store.read(_slow_one) for _ in range(8)))  # eight connections, idle now
        pg_server.restart()
        # the first dead one found has the others checked at once: more dead connections than a
        # transaction's attempts still cost it nothing
        await store.write(lambda c: c.execute("INSERT INTO state_meta VALUES ('after', 'restart')"))
        assert await store.read(lambda c: _one(c, "SELECT value FROM state_meta WHERE key = 'after'")) == "restart"


async def test_after_a_long_outage_the_pool_has_its_connections_back_as_soon_as_it_is_asked(
    pg_server: PgServer, pg_url: str
) -> None:
    """psycopg_pool retries a lost connection for 5 minutes by default, each pause twice the last:
    after an outage of 9 s its next try would come about 6 s after the server was back, and every
    request until then failed. Here a lost connection is retried for 2 s, then given up, and the
    next request that finds none connects at once."""
    db = pg_url.rsplit("/", 1)[1]
    async with PgStore(pg_url, max_size=8, connect_timeout=2) as store:
        await asyncio.gather(*(store.read(_slow_one) for _ in range(8)))
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS false")
        pg_server.psql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'")
        failed = 0
        for _ in range(5):  # the gateway keeps asking while the server is away (8.5 s)
            results = await asyncio.gather(*(store.read(_slow_one) for _ in range(4)), return_exceptions=True)
            failed += sum(isinstance(r, StorageUnavailableError) for r in results)
            await asyncio.sleep(0.5)
        assert failed
        pg_server.psql(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")
        await asyncio.sleep(2.5)  # what was being retried is connected or given up by now
        assert await asyncio.gather(*(store.read(_slow_one) for _ in range(4))) == [1, 1, 1, 1]
        assert await store.healthy()


def test_storage_url_parsing_and_redaction(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert parse_storage_url(None, default_path=tmp_path / "state.db").path == tmp_path / "state.db"
    assert parse_storage_url("sqlite:////var/lib/h/state.db", default_path=tmp_path).path is not None
    pg = parse_storage_url("postgresql://bot:s3cr%40t@db.internal:5432/hermes", default_path=tmp_path)
    assert pg.backend == "postgresql"
    assert "s3cr" not in pg.redacted and "s3cr" not in repr(pg) and "s3cr" not in f"{pg}"
    assert pg.redacted == "postgresql://bot:***@db.internal:5432/hermes"
    for bad in ("mysql://x/y", "postgresql:///nohost", "postgresql://h", "sqlite://host/x.db", "sqlite:", "postgresql://u:p@h:99999/db"):
        with pytest.raises(StorageURLError):
            parse_storage_url(bad, default_path=tmp_path)
    with pytest.raises(StorageURLError) as err:
        parse_storage_url("redis://u:topsecret@h/0", default_path=tmp_path)
    assert "topsecret" not in str(err.value)


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _one(conn: psycopg.Connection, sql: str) -> object:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


async def test_rows_read_by_index_and_by_name_as_sqlite_rows_do(pg_url: str) -> None:
    async with PgStore(pg_url) as store:
        row = await store.read(lambda c: c.execute("SELECT 1 AS one, 'two' AS two").fetchone())
        assert row is not None
        assert (row[0], row["one"], row[1], row["two"], tuple(row), row.keys()) == (1, 1, "two", "two", (1, "two"), ["one", "two"])
        with pytest.raises(KeyError):
            row["three"]


def _slow_one(conn: psycopg.Connection) -> int:
    """A read that holds its connection a moment, so that several at once each take their own."""
    return int(_one(conn, "SELECT 1 FROM pg_sleep(0.05)"))
