"""The 1M-message corpus of ``bench.scale`` in PostgreSQL, built once and cached as a data directory.

The state.db that ``bench/scale.py`` builds and caches is copied into a PostgreSQL database
with COPY (the search indexes dropped first and built once at the end: a GIN index built in one
pass is far cheaper than a million inserts into it), then VACUUM ANALYZE, then the server is
stopped cleanly. The data directory is kept, keyed by that state.db's cache key and the
checksums of the migrations up to search's (0003), so a later run starts a server on it in a second. It lives under
``/var/tmp`` when running as root (the server runs as the ``postgres`` user, who cannot enter
root's home), else next to the state.db.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sqlite3
import time
from pathlib import Path

import psycopg

from storage.postgres import load_migrations, migrate
from tests.pg.server import PgServer

DB_NAME = "bench"
_INDEX_DDL = re.compile(r"CREATE (?:UNIQUE )?INDEX (idx_messages_\w+) ON messages.*?;", re.S)


#: the migrations that shape messages and search; later ones are applied to the cached copy when a
#: PgStore opens it, without a new load
SHAPING = 3


def corpus_key(sqlite_key: str) -> str:
    shaping = [m for m in load_migrations() if m.version <= SHAPING]
    sums = hashlib.sha1("".join(m.checksum for m in shaping).encode()).hexdigest()[:10]
    return f"{sqlite_key}-pg{sums}"


def cache_root(sqlite_cache: Path, key: str) -> Path:
    if os.geteuid() == 0:
        return Path(os.environ.get("HERMES_BENCH_PG_CACHE", "/var/tmp/hermes-gateway-bench-pg")) / key
    return sqlite_cache / key


class CachedPgServer(PgServer):
    """A PgServer whose data directory (and password) stay in ``root`` between runs."""

    def start(self) -> None:
        assert self.root is not None
        self._as_postgres = os.geteuid() == 0
        pwfile = self.root / "password"
        if not (self.datadir / "PG_VERSION").exists():
            shutil.rmtree(self.root, ignore_errors=True)
            self.root.mkdir(parents=True)
            pwfile.write_text(self.password + "\n")
            if self._as_postgres:
                self.root.parent.chmod(0o755)
                shutil.chown(self.root, "postgres", "postgres")
                shutil.chown(pwfile, "postgres", "postgres")
            self.root.chmod(0o700)
            pwfile.chmod(0o600)
            self._run(
                str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", self.user, "--pwfile", str(pwfile),
                "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
            )
        self.password = pwfile.read_text().strip()
        self.port = self.port or _free_port()
        options = [
            f"-p {self.port}", "-c listen_addresses=127.0.0.1", f"-c unix_socket_directories={self.root}",
            "-c max_connections=50", "-c shared_buffers=256MB", "-c maintenance_work_mem=1GB",
            "-c max_wal_size=8GB",
        ]
        if self.fast:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.root / "server.log"),
            "-o", " ".join(options), "-w", "-t", "120", "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """A clean stop that keeps the data directory."""
        if self.root is not None and self.datadir.exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", mode, "-w", "-t", "600", "stop",
                      check=False)


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _columns(lite: sqlite3.Connection, pg: psycopg.Connection, table: str) -> list[str]:
    ours = {str(r[1]) for r in lite.execute(f"PRAGMA table_info({table})")}
    theirs = [str(r[0]) for r in pg.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = %s AND is_generated = 'NEVER' "
        "ORDER BY ordinal_position", (table,))]
    return [c for c in theirs if c in ours]


def _copy(lite: sqlite3.Connection, pg: psycopg.Connection, table: str, order: str) -> int:
    cols = _columns(lite, pg, table)
    names = ", ".join(cols)
    n = 0
    with pg.cursor() as cur, cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in lite.execute(f"SELECT {names} FROM {table} ORDER BY {order}"):
            copy.write_row(row)
            n += 1
            if n % 100_000 == 0:
                print(f"    {table}: {n} rows", flush=True)
    return n


def build(server: PgServer, sqlite_db: Path) -> float:
    """Load ``sqlite_db`` into the (running, empty) server's database ``bench``; seconds taken."""
    t0 = time.perf_counter()
    with psycopg.connect(server.url(), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {DB_NAME}")
    lite = sqlite3.connect(f"file:{sqlite_db}?mode=ro", uri=True)
    try:
        with psycopg.connect(server.url(DB_NAME), autocommit=True) as pg:
            with pg.transaction():
                migrate(pg)
            ddl = [(m.group(1), m.group(0)) for mig in load_migrations() for m in _INDEX_DDL.finditer(mig.sql)]
            for name, _ in ddl:
                pg.execute(f"DROP INDEX {name}")
            with pg.transaction():
                print(f"    sessions: {_copy(lite, pg, 'sessions', 'rowid')} rows", flush=True)
                total = _copy(lite, pg, "messages", "id")
            print(f"    copied {total} messages in {time.perf_counter() - t0:.0f} s; building indexes", flush=True)
            for name, stmt in ddl:
                t1 = time.perf_counter()
                pg.execute(stmt)
                print(f"    {name}: {time.perf_counter() - t1:.0f} s", flush=True)
            top = pg.execute("SELECT coalesce(max(id), 0) + 1 FROM messages").fetchone()
            pg.execute(f"ALTER TABLE messages ALTER COLUMN id RESTART WITH {int(top[0]) if top else 1}")
            pg.execute("VACUUM ANALYZE")
    finally:
        lite.close()
    return time.perf_counter() - t0


def ensure(bindir: Path, sqlite_db: Path, sqlite_key: str, sqlite_cache: Path) -> Path:
    """The cached data directory's root for ``sqlite_db``, built now if missing."""
    root = cache_root(sqlite_cache, corpus_key(sqlite_key))
    if (root / "complete").exists():
        return root
    print(f"  loading {sqlite_db.name} into PostgreSQL at {root} (cached for later runs)", flush=True)
    server = CachedPgServer(bindir, fast=True, root=root)
    shutil.rmtree(root, ignore_errors=True)
    server.start()
    try:
        took = build(server, sqlite_db)
    finally:
        server.stop()
    (root / "complete").write_text(f"{took:.0f}\n")
    print(f"  loaded in {took:.0f} s", flush=True)
    return root
