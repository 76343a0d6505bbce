"""Storage at scale: a state.db of a million messages (``BENCH_SCALE_MESSAGES``).

Builds the file once by bulk load (the bench mix of ``bench.storage``, indexed by the same
indexer function the writer uses) and caches it under ``~/.cache/hermes-gateway-bench``
(``HERMES_BENCH_CACHE``), keyed by message count, schema, FTS layout and merging, so later runs skip
the build. Then measures: appends through the writer against an empty db, the 20 most recent
sessions, discovery search, scroll, daemon start to /readyz, db + WAL size, and a prune of
10 % of the sessions plus VACUUM (on a copy). The method: bench/README.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from bench.gateway import free_port, http_get
from bench.storage import SEED, TextGen, _quiet_logs, conversation, pct, prepare_db, query_set, session_ids
from storage import StateStore, fts_index, fts_merge, open_readonly_connection, queries
from storage import search as store_search
from storage.sqlite._schema import FTS_DDL, FTS_TRIGGERS_DDL, REFERENCE_VERSION, TRIGRAM_ROLES_SQL

MESSAGES = int(os.environ.get("BENCH_SCALE_MESSAGES", "1000000"))
PER_SESSION = 50
SESSIONS = MESSAGES // PER_SESSION
POOL = 8000  # distinct generated messages the load recombines
CHUNK = 5000  # rows per bulk transaction
CACHE = Path(os.environ.get("HERMES_BENCH_CACHE", "~/.cache/hermes-gateway-bench")).expanduser()
APPENDS = 2000  # messages appended per append run, 16 producers
REPEATS = 15
ROOT = Path(__file__).resolve().parents[1]
NOW = 1_780_000_000.0
DAY = 86400.0


def corpus_key() -> str:
    """The rows and the FTS layout: what bench/pg.py's PostgreSQL copy is built from."""
    layout = hashlib.sha1("\n".join((*FTS_DDL, *FTS_TRIGGERS_DDL, TRIGRAM_ROLES_SQL)).encode()).hexdigest()[:10]
    return f"scale-{MESSAGES}-v{REFERENCE_VERSION}-fts{layout}"


def cache_key() -> str:
    """The SQLite file: its rows, and how its FTS segments were merged (search speed depends on it)."""
    merging = f"automerge=0 crisismerge={fts_merge.CRISIS_SEGMENTS} idle={fts_merge.IDLE_PAGES}"
    return f"{corpus_key()}-m{hashlib.sha1(merging.encode()).hexdigest()[:6]}"


# ------------------------------------------------------------------ build


def _rows(pool: list[tuple[str, dict[str, Any]]], sids: list[str]) -> Any:
    """Every session's 50 messages: pool messages rotated at a word, so no two texts are equal."""
    n = 0
    for s, sid in enumerate(sids):
        start = NOW - (SESSIONS - s) * (365 * DAY / SESSIONS)
        for j in range(PER_SESSION):
            _, cols = pool[(s * 7 + j * 13) % len(pool)] if j % 4 else pool[(s * 4 + j) % len(pool)]
            text = cols["content"]
            cut = text.find(" ", (s * 31 + j * 17) % max(1, len(text)))
            content = text if cut < 0 else f"{text[cut + 1:]} {text[:cut]}"
            tool_calls = cols.get("tool_calls")
            yield (sid, cols["role"], content, cols.get("tool_call_id"),
                   None if tool_calls is None else json.dumps(tool_calls), cols.get("tool_name"),
                   start + j * 30.0, cols.get("finish_reason"))
            n += 1


def build(path: Path, gen: TextGen) -> float:
    t0 = time.perf_counter()
    tmp = path.with_name(path.name + ".building")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    sids = session_ids("z", SESSIONS)
    prepare_db(tmp, sids)
    pool = conversation(gen, "pool", POOL, None, cjk=0.02)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("PRAGMA synchronous=OFF")
        conn.execute("PRAGMA cache_size=-200000")
        conn.execute("UPDATE sessions SET started_at = ? - (? - rowid) * ?, ended_at = ? - (? - rowid) * ? + 3600, "
                     "end_reason = 'bench'", (NOW, SESSIONS, 365 * DAY / SESSIONS, NOW, SESSIONS, 365 * DAY / SESSIONS))
        rows = _rows(pool, sids)
        done = 0
        while True:
            chunk = [r for _, r in zip(range(CHUNK), rows, strict=False)]
            if not chunk:
                break
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO messages (session_id, role, content, tool_call_id, tool_calls, tool_name, "
                             "timestamp, finish_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", chunk)
            fts_index.index_pending(conn, CHUNK)  # the writer's indexer, one chunk at a time
            fts_merge.merge_step(conn, fts_merge.IDLE_PAGES)  # and its merging (FTS5's own is off)
            conn.execute("COMMIT")
            done += len(chunk)
            if done % 100_000 == 0:
                print(f"  built {done} messages in {time.perf_counter() - t0:.0f} s", flush=True)
        fts_merge.merge_all(conn)  # what the writer's idle time would finish
        conn.execute("UPDATE sessions SET message_count = (SELECT count(*) FROM messages m WHERE m.session_id = sessions.id)")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    tmp.rename(path)
    return time.perf_counter() - t0


# -------------------------------------------------------------- measuring


async def _appends(db: Path) -> list[float]:
    """16 producers append APPENDS messages of the bench mix; each one's submit-to-ack seconds."""
    gen = TextGen(random.Random(SEED + 5))
    msgs = conversation(gen, "x", APPENDS, None)
    lat: list[float] = []
    async with StateStore(db) as store:
        top = await store.read(fts_index.last_message_id)
        sids = [str(r["id"]) for r in await store.recent_sessions(limit=16)] or ["none"]
        if sids == ["none"]:
            await store.create_session("none", "cli")

        async def producer(k: int) -> None:
            for i in range(k, len(msgs), 16):
                cols = msgs[i][1]
                t = time.perf_counter()
                await store.append_message(sids[k % len(sids)], **cols)
                lat.append(time.perf_counter() - t)

        await asyncio.gather(*(producer(k) for k in range(16)))
        # Leave the cached file as it was (the rows and their index entries).
        await store.write(lambda c: c.execute("DELETE FROM messages WHERE id > ?", (top,)))
        await store.catch_up_index()
    return lat


def _timed(fn: Callable[[], Any], repeats: int = REPEATS) -> list[float]:
    fn()
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


async def _ready_seconds(db: Path, tmp: Path) -> float:
    """``gateway.cli run`` on a home holding this db (hard link): start to /readyz 200."""
    home = tmp / "home"
    home.mkdir()
    os.link(db, home / "state.db")
    port = free_port()
    config = {"model": {"base_url": "http://127.0.0.1:9/v1", "default": "m", "max_retries": 0},
              "platforms": {"api_server": {"host": "127.0.0.1", "port": port}},
              "auth": {"allow_all_users": True}}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER", "GATEWAY_"))}
    env |= {"HERMES_HOME": str(home), "PYTHONPATH": str(ROOT)}
    log = (tmp / "gateway.log").open("w")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run"], cwd=ROOT, env=env,  # noqa: ASYNC220
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the gateway exited with {proc.returncode}; see {tmp / 'gateway.log'}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                status, _ = await http_get(port, "/readyz")
                if status == 200:
                    return time.perf_counter() - t0
            if time.perf_counter() - t0 > 120:
                raise RuntimeError("the gateway was not ready within 120 s")
            await asyncio.sleep(0.02)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def _prune_vacuum(db: Path) -> tuple[int, float, float]:
    async with StateStore(db) as store:
        days = (NOW - (NOW - 365 * DAY * 0.9)) / DAY  # sessions older than 90 % of the year: the oldest 10 %
        t0 = time.perf_counter()
        result = await store.prune(older_than_days=days + (time.time() - NOW) / DAY)
        prune_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        await store.vacuum()
        return result.deleted, prune_s, time.perf_counter() - t1


def main() -> int:
    logs = _quiet_logs()
    try:
        return _main()
    finally:
        import structlog

        structlog.configure(**logs)


def _main() -> int:
    print(f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; "
          f"{MESSAGES} messages in {SESSIONS} sessions")
    gen = TextGen(random.Random(SEED + 3))
    CACHE.mkdir(parents=True, exist_ok=True)
    db = CACHE / f"{cache_key()}.db"
    if db.exists():
        print(f"  using the cached build {db}")
    else:
        print(f"  building {db} (cached for later runs)", flush=True)
        print(f"  built in {build(db, gen):.0f} s")
    tmp = Path(tempfile.mkdtemp(prefix="hermes-scale-"))
    try:
        empty = tmp / "empty" / "state.db"
        prepare_db(empty, ["none"])
        lat_empty = asyncio.run(_appends(empty))
        lat_full = asyncio.run(_appends(db))
        conn = open_readonly_connection(db)
        try:
            recent = _timed(partial(queries.recent_sessions, conn, limit=20))
            picked = query_set(conn, gen.content_words, MESSAGES)
            per_query = []
            discovery: list[float] = []
            for q, d in picked:
                times = _timed(partial(store_search.search_sessions, conn, q))
                discovery += times
                per_query.append((q, d, statistics.median(times)))
            rng = random.Random(SEED + 9)
            top = fts_index.last_message_id(conn)
            anchors = [conn.execute("SELECT id, session_id FROM messages WHERE id >= ? LIMIT 1",
                                    (rng.randrange(1, top),)).fetchone() for _ in range(300)]
            scroll = [t for mid, sid in anchors for t in _timed(
                partial(store_search.messages_around, conn, sid, mid, window=10), 1)]
        finally:
            conn.close()
        ready = asyncio.run(_ready_seconds(db, tmp))
        size = db.stat().st_size + (Path(f"{db}-wal").stat().st_size if Path(f"{db}-wal").exists() else 0)
        copy = tmp / "prune" / "state.db"
        copy.parent.mkdir()
        shutil.copyfile(db, copy)
        deleted, prune_s, vacuum_s = asyncio.run(_prune_vacuum(copy))
        after = copy.stat().st_size
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    p99_ratio = pct(lat_full, 0.99) / pct(lat_empty, 0.99)
    recent_ms = statistics.median(recent) * 1000
    disc_ms = statistics.median(discovery) * 1000
    print(f"appends (16 producers, {APPENDS} messages): empty db p50 {pct(lat_empty, 0.5) * 1000:.2f} ms "
          f"p99 {pct(lat_empty, 0.99) * 1000:.2f} ms; {MESSAGES} messages p50 {pct(lat_full, 0.5) * 1000:.2f} ms "
          f"p99 {pct(lat_full, 0.99) * 1000:.2f} ms")
    for q, d, p50 in per_query:
        print(f"  discovery {q!r:<24} {d:>8} matching messages  p50 {p50 * 1000:8.2f} ms")
    print(f"  scroll p50 {statistics.median(scroll) * 1000:.3f} ms; db + WAL {size / 1e9:.2f} GB "
          f"({size / MESSAGES:.0f} B/message)")
    print(f"  prune of {deleted} sessions (10 %) {prune_s:.1f} s, VACUUM {vacuum_s:.1f} s, "
          f"file {after / 1e9:.2f} GB after")
    print()
    print(f"scale.append_p99_ratio={p99_ratio:.2f}")
    print(f"scale.recent_sessions_ms={recent_ms:.2f}")
    print(f"scale.discovery_p50_ms={disc_ms:.2f}")
    print(f"scale.scroll_p50_ms={statistics.median(scroll) * 1000:.3f}")
    print(f"scale.ready_s={ready:.2f}")
    print(f"scale.db_bytes={size}")
    print(f"scale.prune_s={prune_s:.1f}")
    print(f"scale.vacuum_s={vacuum_s:.1f}")
    slowest = max(per_query, key=lambda q: q[2])
    targets = [
        ("append_p99_ratio <= 2 (vs empty db)", f"{p99_ratio:.2f}", p99_ratio <= 2.0),
        ("recent_sessions_ms <= 50", f"{recent_ms:.2f} ms", recent_ms <= 50.0),
        ("discovery_p50_ms <= 20", f"{disc_ms:.2f} ms; slowest query p50 {slowest[2] * 1000:.1f} ms "
         f"({slowest[0]!r})", disc_ms <= 20.0),
        ("ready_s <= 2", f"{ready:.2f} s", ready <= 2.0),
    ]
    print("targets:")
    for name, measured, ok in targets:
        print(f"  {'PASS' if ok else 'MISS'}  {name}: {measured}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
