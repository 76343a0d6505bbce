"""PostgreSQL against SQLite: appends from one and from three processes ("nodes"), and discovery at
1M messages. The method and the figures: bench/README.md, "PostgreSQL (`bench/pg.py`)".

Every server here is started by this module with durable settings (fsync, synchronous_commit,
full_page_writes on: ``tests/pg/server.py``'s ``PgServer(bindir, fast=False)``), on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

import storage.postgres
from bench import scale
from bench._pg_corpus import DB_NAME, CachedPgServer, ensure
from bench.storage import SCALE, SEED, TextGen, _quiet_logs, conversation, pct, query_set
from storage import StateStore, open_readonly_connection
from storage import search as lite_search
from tests.pg.server import PgServer, find_bindir

APPENDS = max(400, round(4000 * SCALE))  # messages per appending process
PRODUCERS = 16  # concurrent chats per process, each awaiting its append before the next
NODES = 3
REPEATS = 15  # timed calls per discovery query (after one warm-up call), as bench/scale.py
ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ appending


def _plain_append(conn: Any, session_id: str, role: str, content: str | None = None, *,
                  tool_calls: Any = None, tool_call_id: str | None = None, tool_name: str | None = None,
                  finish_reason: str | None = None, timestamp: float | None = None) -> int:
    """What ``ops.append_message`` writes (the row and the session's counters), while the
    PostgreSQL ``ops`` family is not on this branch."""
    calls = None if tool_calls is None else json.dumps(tool_calls, ensure_ascii=False, separators=(",", ":"))
    row = conn.execute(
        "INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, timestamp, "
        "finish_reason) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (session_id, role, content, tool_call_id, calls, tool_name, timestamp or time.time(), finish_reason),
    ).fetchone()
    conn.execute("UPDATE sessions SET message_count = message_count + 1, tool_call_count = tool_call_count + %s "
                 "WHERE id = %s", (len(tool_calls) if isinstance(tool_calls, list) else 0, session_id))
    return int(row[0])


def append_function() -> tuple[str, Callable[..., int]]:
    ops = getattr(storage.postgres, "ops", None)
    if ops is not None and hasattr(ops, "append_message"):
        return "storage.postgres.ops.append_message", ops.append_message
    return "a plain INSERT + the session's counters (no PostgreSQL ops family yet)", _plain_append


def _create_sessions(conn: Any, ids: list[str]) -> None:
    for sid in ids:
        conn.execute("INSERT INTO sessions (id, source, started_at) VALUES (%s, 'cli', %s)", (sid, time.time()))


def _mix(node: int) -> list[tuple[str, dict[str, Any]]]:
    gen = TextGen(random.Random(SEED + 5))  # the same texts on every node and on SQLite
    return [(f"n{node}-{i % PRODUCERS}", cols) for i, (_, cols) in enumerate(conversation(gen, "x", APPENDS, None))]


async def _produce(write: Callable[[str, dict[str, Any]], Any], msgs: list[tuple[str, dict[str, Any]]]) -> None:
    async def producer(k: int) -> None:
        for i in range(k, len(msgs), PRODUCERS):
            sid, cols = msgs[i]
            await write(sid, cols)

    await asyncio.gather(*(producer(k) for k in range(PRODUCERS)))


async def _pg_node(url: str, node: int, go: Callable[[], Any] | None = None) -> tuple[int, float, float]:
    """One node: its own PgStore; returns (messages, wall-clock start, end)."""
    _, append = append_function()
    msgs = _mix(node)
    async with storage.postgres.PgStore(url) as store:
        await store.write(partial(_create_sessions, ids=sorted({sid for sid, _ in msgs})))
        if go is not None:
            await asyncio.to_thread(go)
        t0 = time.time()
        await _produce(lambda sid, cols: store.write(partial(append, session_id=sid, **cols)), msgs)
        return len(msgs), t0, time.time()


def _child(url: str, node: int) -> None:
    """``python -m bench.pg --node URL N``: one node of the three, started when stdin says go."""
    def go() -> None:
        print("ready", flush=True)
        sys.stdin.readline()

    _quiet_logs()
    n, t0, t1 = asyncio.run(_pg_node(url, node, go))
    print(json.dumps({"n": n, "t0": t0, "t1": t1}), flush=True)


def _three_nodes(url: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "bench.pg", "--node", url, str(k)], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for k in range(NODES)]
    try:
        for p in procs:
            assert p.stdout is not None
            while (line := p.stdout.readline()) and line.strip() != "ready":
                pass  # a log line
            if not line:
                raise RuntimeError(f"a node exited before it was ready ({p.wait()})")
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        done = [json.loads(p.communicate(timeout=1800)[0].strip().splitlines()[-1]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return float(sum(d["n"] for d in done) / (max(d["t1"] for d in done) - min(d["t0"] for d in done)))


async def _sqlite_rate(db: Path) -> float:
    msgs = _mix(0)
    async with StateStore(db) as store:
        for sid in sorted({sid for sid, _ in msgs}):
            await store.create_session(sid, "cli")
        t0 = time.perf_counter()
        await _produce(lambda sid, cols: store.append_message(sid, **cols), msgs)
        return len(msgs) / (time.perf_counter() - t0)


def appends(bindir: Path, tmp: Path) -> dict[str, float]:
    server = PgServer(bindir, fast=False)
    server.start()
    try:
        for name in ("one", "three"):
            with psycopg.connect(server.url(), autocommit=True) as admin:
                admin.execute(f"CREATE DATABASE {name}")
        n, t0, t1 = asyncio.run(_pg_node(server.url("one"), 0))
        one = n / (t1 - t0)
        three = _three_nodes(server.url("three"))
    finally:
        server.stop()
    lite = asyncio.run(_sqlite_rate(tmp / "state.db"))
    return {"one": one, "three": three, "sqlite": lite}


# ------------------------------------------------------------------ discovery


def _timed(fn: Callable[[], Any]) -> list[float]:
    fn()
    out = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _top20(found: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(r["session_id"], r["match_message_id"]) for r in found]


async def _pg_discovery(url: str, queries: list[str]) -> dict[str, tuple[list[float], list[tuple[str, int]]]]:
    out = {}
    async with storage.postgres.PgStore(url, min_size=1, max_size=1, statement_timeout=600) as store:
        for q in queries:
            read = partial(store.run_sync, partial(storage.postgres.search.search_sessions, query=q), readonly=True)
            times = _timed(read)
            found = store.run_sync(partial(storage.postgres.search.search_sessions, query=q, limit=20), readonly=True)
            out[q] = (times, _top20(found))
    return out


def discovery(bindir: Path) -> dict[str, Any]:
    gen = TextGen(random.Random(SEED + 3))  # bench/scale.py's generator: its content words
    db = scale.CACHE / f"{scale.cache_key()}.db"
    if not db.exists():
        print(f"  building {db} first (bench/scale.py's cache)", flush=True)
        scale.build(db, gen)
    root = ensure(bindir, db, scale.corpus_key(), scale.CACHE)
    conn = open_readonly_connection(db)
    try:
        picked = query_set(conn, gen.content_words, scale.MESSAGES)
        lite = {q: (_timed(partial(lite_search.search_sessions, conn, q)),
                    _top20(lite_search.search_sessions(conn, q, limit=20))) for q, _ in picked}
    finally:
        conn.close()
    server = CachedPgServer(bindir, fast=False, root=root)
    server.start()
    try:
        pg = asyncio.run(_pg_discovery(server.url(DB_NAME), [q for q, _ in picked]))
    finally:
        server.stop()
    return {"picked": picked, "sqlite": lite, "pg": pg}


# ------------------------------------------------------------------ report


def main() -> int:
    logs = _quiet_logs()
    try:
        return _main()
    finally:
        import structlog

        structlog.configure(**logs)


def _main() -> int:
    bindir = find_bindir()
    if bindir is None:
        print("no PostgreSQL server binaries (initdb, pg_ctl) on this machine: skipped")
        return 0
    how, _ = append_function()
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; PostgreSQL from {bindir}")
    print(f"  appends: {APPENDS} messages of the bench mix per process, {PRODUCERS} producers each; via {how}")
    with tempfile.TemporaryDirectory(prefix="hermes-pg-bench-") as tmp:
        rates = appends(bindir, Path(tmp))
    print(f"  load average {os.getloadavg()[0]:.2f}; discovery at {scale.MESSAGES} messages", flush=True)
    found = discovery(bindir)
    lite_all = [t for times, _ in found["sqlite"].values() for t in times]
    pg_all = [t for times, _ in found["pg"].values() for t in times]
    same = 0
    for q, d in found["picked"]:
        lt, ltop = found["sqlite"][q]
        pt, ptop = found["pg"][q]
        equal = ltop == ptop
        same += equal
        print(f"  discovery {q!r:<24} {d:>8} matching  sqlite p50 {statistics.median(lt) * 1000:8.2f} ms  "
              f"pg p50 {statistics.median(pt) * 1000:8.2f} ms  top 20 {'same' if equal else 'DIFFERENT'}")
    lite_p50, pg_p50 = statistics.median(lite_all) * 1000, statistics.median(pg_all) * 1000
    ratio = pg_p50 / lite_p50
    print()
    print(f"pg.append_msgs_per_s_1={rates['one']:.0f}")
    print(f"pg.append_msgs_per_s_3={rates['three']:.0f}")
    print(f"pg.sqlite_append_msgs_per_s={rates['sqlite']:.0f}")
    print(f"pg.append_ratio_1_vs_sqlite={rates['one'] / rates['sqlite']:.2f}")
    print(f"pg.append_ratio_3_vs_sqlite={rates['three'] / rates['sqlite']:.2f}")
    print(f"pg.discovery_p50_ms={pg_p50:.2f}")
    print(f"pg.sqlite_discovery_p50_ms={lite_p50:.2f}")
    print(f"pg.discovery_p99_ms={pct(pg_all, 0.99) * 1000:.2f}")
    print(f"pg.discovery_ratio_vs_sqlite={ratio:.2f}")
    print(f"pg.same_top20={same}/{len(found['picked'])}")
    print("targets:")
    print(f"  {'PASS' if ratio <= 2.0 else 'MISS'}  discovery_ratio_vs_sqlite <= 2: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--node":
        _child(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(main())
