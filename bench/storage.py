"""Storage benchmark: message appends under different write strategies, then search.

Write modes (the same generated messages, the same schema, a fresh db file each):

* ``baseline``  - sync sqlite3, one ``BEGIN IMMEDIATE`` ... ``COMMIT`` per append
                  (the original hermes way: WAL, synchronous FULL, default autocheckpoint)
* ``raw-1000``  - the same rows, sync, 1000 rows per transaction (the raw limit)
* ``raw-16``    - reference only: sync, 16 rows per transaction
* ``writer@N``  - ``StateStore.append_message`` from N concurrent producer coroutines
                  (default ``WriterSettings``: group commit, synchronous FULL)

Search: a 100k-message db across 2000 sessions; ``search_sessions`` (discovery)
and ``messages_around`` (scroll) through a read-only connection.

``BENCH_SCALE`` (default 1) scales the message counts. The method: bench/README.md.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import platform
import random
import shutil
import sqlite3
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import structlog

from storage import (
    StateStore,
    WriterSettings,
    fts_index,
    fts_layout,
    fts_merge,
    open_readonly_connection,
    ops,
    sanitize_fts5_query,
)
from storage import search as store_search

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
SEED = 20240611

WRITE_SESSIONS = 1000  # one conversation per producer at the widest fan-out
WRITE_PER_SESSION = max(4, round(20 * SCALE))  # 20 -> 20 000 messages at scale 1
PRODUCERS = (1, 16, 256, 1000)
RAW_TX_ROWS = 1000
REF_TX_ROWS = 16  # reference row: sync, 16 rows per transaction

SEARCH_MESSAGES = max(2000, round(100_000 * SCALE))
SEARCH_SESSIONS = max(40, round(2000 * SCALE))
#: measured on main at 7ff2b1d (inline FTS, every append indexed on insert): 733 MB / 100 000 messages
TODAY_BYTES_PER_MESSAGE = 7686
SEARCH_REPEATS = 25  # timed calls per discovery query
SCROLL_CALLS = 2000
WAL_SAMPLE_EVERY = 0.002  # seconds
TICK = 0.001  # the loop-lag ticker's sleep

WAL_LIMIT_MB = 64.0

# A message as the benchmark hands it to every mode: (session id, append_message kwargs).
Msg = tuple[str, dict[str, Any]]


# ------------------------------------------------------------------------ text

_STOP = (
    "the of and to a in is it you that for this on with be as are was not have i we can "
    "but or if at by from your so will do an all my which there what they one would more "
    "when about has just also then out up them no some should here like how me our any "
    "need now use get only than into its make other may see first could these where"
).split()

_CONTENT = (
    "file error function test build server config deploy message session token model "
    "request response cache database query index table schema migration version update "
    "install package python docker container network timeout retry logs output input "
    "script command terminal branch commit merge review change issue bug fix patch "
    "release memory disk latency thread process queue worker event loop async await "
    "client api endpoint route handler payload json yaml settings option value default "
    "user account password login permission access key secret certificate domain dns "
    "proxy port host address local remote path directory folder image video audio "
    "document report summary chart graph metric dashboard alert monitor health check "
    "backup restore export import sync upload download stream buffer chunk batch job "
    "schedule cron daily weekly calendar meeting reminder email inbox draft reply "
    "telegram discord slack channel thread mention reaction emoji bot agent tool skill "
    "search result page link article paper research note idea plan task project goal "
    "budget invoice price cost payment order shipping delivery customer support ticket "
    "weather forecast travel flight hotel booking restaurant recipe dinner coffee "
    "garden music playlist movie book chapter story poem translate language grammar "
    "spanish french german japanese history science physics chemistry biology math "
    "equation proof theorem matrix vector gradient training dataset benchmark score "
    "compile linker kernel driver firmware hardware laptop phone battery screen keyboard "
    "rust golang javascript typescript react component state props render style layout "
    "sqlite postgres redis kafka nginx kubernetes helm terraform ansible github gitlab "
    "pipeline workflow action secret variable environment staging production rollback "
    "incident outage postmortem runbook oncall pager latency throughput capacity "
    "scaling shard replica leader follower consensus snapshot checkpoint journal wal"
).split()

_SYLLABLES = (
    "ka lo mi ren tor va shi pel dro qu an bel cor dex fin gal hup ist jor kel lum mar "
    "nor oph pra rix sol tam ul ver wex yor zan bri cla fro gri pla sti tri vel zor"
).split()


class TextGen:
    """Zipf-distributed words (stop words, content words, then a long tail)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        content = list(dict.fromkeys(w for w in _CONTENT if w not in _STOP))
        rng.shuffle(content)
        tail: set[str] = set()
        while len(tail) < 30_000:
            word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
            if word not in _STOP and word not in content:
                tail.add(word)
        tail_list = sorted(tail)
        rng.shuffle(tail_list)
        self.vocab = [*_STOP, *content, *tail_list]
        self.content_words = set(content) | tail
        weights = [1.0 / (rank + 2.7) for rank in range(len(self.vocab))]  # Zipf-Mandelbrot
        acc = 0.0
        self.cum: list[float] = []
        for w in weights:
            acc += w
            self.cum.append(acc)

    def words(self, n: int) -> list[str]:
        return self.rng.choices(self.vocab, cum_weights=self.cum, k=n)

    def text(self, chars: int) -> str:
        """Sentences of words, cut to about ``chars`` characters."""
        words = self.words(chars // 5 + 8)
        out: list[str] = []
        size = 0
        i = 0
        while size < chars and i < len(words):
            n = self.rng.randint(6, 16)
            sentence = words[i : i + n]
            i += n
            if not sentence:
                break
            if self.rng.random() < 0.3 and len(sentence) > 4:
                sentence[len(sentence) // 2] += ","
            if self.rng.random() < 0.08:
                sentence.append(f"{self.rng.choice(sentence).strip(',')}_{self.rng.randint(1, 99)}.py")
            s = " ".join(sentence)
            s = s[0].upper() + s[1:] + self.rng.choice(".....?!")
            out.append(s)
            size += len(s) + 1
        text = " ".join(out)
        return text if len(text) <= chars else text[: text.rfind(" ", 0, chars) or chars]


# Some conversations are partly in Chinese or Japanese, so the CJK discovery query has hits.
_CJK = (
    "机器学习模型 数据库索引 服务器部署 北海道の雪まつり 東京の天気予報 会議の議事録 "
    "全文検索エンジン 日本語の文法 中文分词算法 云计算平台 网络安全策略 旅行の計画"
).split()
CJK_SHARE = 0.02  # of user and assistant messages in the search corpus


_TOOLS = ("web_search", "read_file", "terminal", "search_files", "browser_navigate", "execute_code")


def _tool_args(gen: TextGen, tool: str) -> dict[str, Any]:
    if tool == "web_search":
        return {"query": " ".join(gen.words(4))}
    if tool in ("read_file", "search_files"):
        return {"path": "/".join(["~", *gen.words(2)]) + ".md", "pattern": gen.words(1)[0]}
    if tool == "terminal":
        return {"command": f"grep -rn {gen.words(1)[0]} ./src | head -50", "timeout": 60}
    if tool == "browser_navigate":
        return {"url": f"https://docs.example.org/{'/'.join(gen.words(3))}"}
    return {"code": f"print(len({gen.words(1)[0]!r}))", "language": "python"}


def _tool_output(gen: TextGen, tool: str, chars: int) -> str:
    """A ~``chars`` JSON tool result, the shape agents get back from tools."""
    results: list[dict[str, Any]] = []
    body = {"tool": tool, "status": "ok", "results": results}
    size = 60
    while size < chars:
        item = {
            "title": gen.text(50),
            "url": f"https://www.example.com/{'-'.join(gen.words(4))}",
            "snippet": gen.text(min(300, max(60, chars - size - 140))),
        }
        results.append(item)
        size += len(json.dumps(item, ensure_ascii=False)) + 2
    return json.dumps(body, ensure_ascii=False)


def _with_cjk(gen: TextGen, text: str, share: float) -> str:
    if share and gen.rng.random() < share:
        return f"{text} {gen.rng.choice(_CJK)}{gen.rng.choice(_CJK)}。"
    return text


def conversation(gen: TextGen, session_id: str, n: int, start: float | None, cjk: float = 0.0) -> list[Msg]:
    """``n`` messages in turns of: user, assistant with tool_calls, tool, assistant;
    ``cjk``: the share of user and assistant messages that end in a CJK phrase."""
    rng = gen.rng
    out: list[Msg] = []
    t = start
    call = 0
    while len(out) < n:
        tool = rng.choice(_TOOLS)
        call += 1
        call_id = f"call_{session_id[-8:]}_{call:04d}"
        turn: list[dict[str, Any]] = [
            {"role": "user", "content": _with_cjk(gen, gen.text(rng.randint(120, 280)), cjk)},
            {
                "role": "assistant",
                "content": _with_cjk(gen, gen.text(rng.randint(500, 1100)), cjk),
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": json.dumps(_tool_args(gen, tool))},
                    }
                ],
                "finish_reason": "tool_calls",
            },
            {
                "role": "tool",
                "content": _tool_output(gen, tool, rng.randint(1600, 2400)),
                "tool_call_id": call_id,
                "tool_name": tool,
            },
            {"role": "assistant", "content": _with_cjk(gen, gen.text(rng.randint(500, 1100)), cjk),
             "finish_reason": "stop"},
        ]
        for cols in turn[: n - len(out)]:
            if t is not None:
                t += rng.uniform(2.0, 90.0)
                cols["timestamp"] = t
            out.append((session_id, cols))
    return out


def session_ids(prefix: str, n: int) -> list[str]:
    return [f"20240601_120000_{prefix}{i:06x}" for i in range(n)]


def interleave(convs: Sequence[list[Msg]]) -> list[Msg]:
    """Round robin over conversations: message j of every session, then j+1."""
    out: list[Msg] = []
    longest = max(len(c) for c in convs)
    for j in range(longest):
        out.extend(c[j] for c in convs if j < len(c))
    return out


# ---------------------------------------------------------------- measuring


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class WalSampler:
    """Samples the -wal file size on a thread of its own, every few ms."""

    def __init__(self, db: Path) -> None:
        self.wal = Path(str(db) + "-wal")
        self.max_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="wal-sampler", daemon=True)

    def _sample(self) -> None:
        try:
            self.max_bytes = max(self.max_bytes, self.wal.stat().st_size)
        except OSError:
            pass

    def _run(self) -> None:
        while not self._stop.wait(WAL_SAMPLE_EVERY):
            self._sample()

    def __enter__(self) -> WalSampler:
        self._sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


@dataclass
class Result:
    mode: str
    messages: int
    seconds: float
    latencies: list[float]  # seconds, one per message, submit -> ack
    wal_max_bytes: int
    loop_lags: list[float] | None = None  # seconds of oversleep per tick
    notes: dict[str, Any] = field(default_factory=dict)
    cpu_seconds: float = 0.0  # process CPU (all threads) while the mode ran

    @property
    def cpu_ms_per_msg(self) -> float:
        return self.cpu_seconds / self.messages * 1000

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def p50_ms(self) -> float:
        return pct(self.latencies, 0.50) * 1000

    @property
    def p99_ms(self) -> float:
        return pct(self.latencies, 0.99) * 1000

    @property
    def lag_p99_ms(self) -> float | None:
        return None if self.loop_lags is None else pct(self.loop_lags, 0.99) * 1000

    @property
    def wal_mb(self) -> float:
        return self.wal_max_bytes / 1024 / 1024


# -------------------------------------------------------------- db creation


def _quiet_logs() -> dict[str, Any]:
    """Warnings only (the writer logs every start and stop); returns the old config."""
    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    return old


async def _prepare_async(
    db: Path, sessions: Sequence[str], parents: dict[str, str] | None, reference_layout: bool
) -> None:
    async with StateStore(db) as store:

        def create_all(conn: sqlite3.Connection) -> None:
            for i, sid in enumerate(sessions):
                ops.create_session(
                    conn,
                    sid,
                    source=("telegram", "discord", "slack", "cli")[i % 4],
                    model="anthropic/claude-sonnet-4",
                    user_id=f"user{i % 97}",
                    parent_session_id=(parents or {}).get(sid),
                    started_at=1_717_243_200.0 + i * 3600.0,
                )

        await store.write(create_all)
        if reference_layout:
            await store.write(fts_layout.install_reference_layout)


def prepare_db(
    db: Path, sessions: Sequence[str], parents: dict[str, str] | None = None, *, reference_layout: bool = False
) -> None:
    """Our schema (a StateStore opened and closed) with the sessions in it, WAL truncated.

    ``reference_layout``: the FTS tables and triggers of the reference's v11 (inline
    tables indexed by insert triggers): how every append was indexed before, the sync modes' way."""
    db.parent.mkdir(parents=True, exist_ok=True)
    asyncio.run(_prepare_async(db, sessions, parents, reference_layout))


def open_sync(db: Path) -> sqlite3.Connection:
    """The original hermes connection: plain sqlite3, WAL, default synchronous, foreign keys."""
    conn = sqlite3.connect(str(db), isolation_level=None, check_same_thread=False, timeout=10.0)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def append(conn: sqlite3.Connection, msg: Msg) -> None:
    sid, cols = msg
    ops.append_message(conn, sid, **cols)


# -------------------------------------------------------------- write modes


def run_baseline(db: Path, stream: list[Msg]) -> Result:
    conn = open_sync(db)
    sync_default = conn.execute("PRAGMA synchronous").fetchone()[0]
    conn.execute("PRAGMA synchronous=FULL")
    lat: list[float] = []
    perf = time.perf_counter
    try:
        with WalSampler(db) as wal:
            c0, t0 = time.process_time(), perf()
            for msg in stream:
                t = perf()
                conn.execute("BEGIN IMMEDIATE")
                append(conn, msg)
                conn.execute("COMMIT")
                lat.append(perf() - t)
            elapsed, cpu = perf() - t0, time.process_time() - c0
    finally:
        conn.close()
    return Result("baseline", len(stream), elapsed, lat, wal.max_bytes,
                  notes={"synchronous_default": sync_default}, cpu_seconds=cpu)


def run_raw(db: Path, stream: list[Msg], rows: int = RAW_TX_ROWS) -> Result:
    conn = open_sync(db)
    conn.execute("PRAGMA synchronous=FULL")
    lat: list[float] = []
    perf = time.perf_counter
    try:
        with WalSampler(db) as wal:
            c0, t0 = time.process_time(), perf()
            for start in range(0, len(stream), rows):
                chunk = stream[start : start + rows]
                began: list[float] = []
                conn.execute("BEGIN IMMEDIATE")
                for msg in chunk:
                    began.append(perf())
                    append(conn, msg)
                conn.execute("COMMIT")
                done = perf()
                lat.extend(done - b for b in began)
            elapsed, cpu = perf() - t0, time.process_time() - c0
    finally:
        conn.close()
    return Result(f"raw-{rows}", len(stream), elapsed, lat, wal.max_bytes, cpu_seconds=cpu)


async def _writer_mode(db: Path, per_producer: list[list[Msg]]) -> Result:
    lat: list[float] = []
    lags: list[float] = []
    perf = time.perf_counter
    async with StateStore(db) as store:  # default WriterSettings: synchronous=FULL
        assert store.writer.settings == WriterSettings() and WriterSettings().synchronous == "FULL"
        running = True

        async def ticker() -> None:
            while running:
                t = perf()
                await asyncio.sleep(TICK)
                lags.append(max(0.0, perf() - t - TICK))

        async def producer(msgs: list[Msg]) -> None:
            for sid, cols in msgs:
                t = perf()
                await store.append_message(sid, **cols)
                lat.append(perf() - t)

        with WalSampler(db) as wal:
            tick = asyncio.create_task(ticker())
            await asyncio.sleep(0.05)
            lags.clear()
            c0, t0 = time.process_time(), perf()
            await asyncio.gather(*(producer(m) for m in per_producer))
            elapsed, cpu = perf() - t0, time.process_time() - c0
            running = False
            await tick
            # Not in the timed span: the indexer's work still waiting when the last caller heard back.
            t1 = perf()
            waiting = store.writer.stats.index_pending
            await store.catch_up_index()
            catch_up = perf() - t1
        stats = store.writer.stats
        notes = {
            "commits": stats.commits,
            "avg_batch": stats.committed_ops / max(1, stats.commits),
            "max_batch": stats.max_batch,
            "checkpoints": dict(stats.checkpoints),
            "index_waiting": waiting,
            "index_catch_up_s": catch_up,
        }
    n = sum(len(m) for m in per_producer)
    return Result(f"writer@{len(per_producer)}", n, elapsed, lat, wal.max_bytes, lags, notes, cpu)


def run_writer(db: Path, convs: list[list[Msg]], producers: int) -> Result:
    # Producer k owns sessions k, k+N, ...: it writes its conversations in the
    # global (round robin) order, awaiting each append before the next.
    per_producer = [interleave(convs[k::producers]) for k in range(producers)]
    return asyncio.run(_writer_mode(db, per_producer))


# ------------------------------------------------------------------- search


def build_search_db(
    db: Path, gen: TextGen, messages: int = SEARCH_MESSAGES, sessions: int = SEARCH_SESSIONS,
    reference_layout: bool = False,
) -> tuple[int, float]:
    """``messages`` across ``sessions`` through our schema, every message indexed at the end
    (``reference_layout``: the reference's inline tables, filled by its insert triggers)."""
    sids = session_ids("s", sessions)
    rng = gen.rng
    # About one session in ten continues an earlier one (compression splits).
    parents = {sid: sids[i - 1] for i, sid in enumerate(sids) if i and rng.random() < 0.1}
    prepare_db(db, sids, parents, reference_layout=reference_layout)
    per = messages // sessions
    extra = messages - per * sessions
    convs = [
        conversation(gen, sid, per + (1 if i < extra else 0), 1_717_243_200.0 + i * 3600.0, cjk=CJK_SHARE)
        for i, sid in enumerate(sids)
    ]
    stream = interleave(convs)
    del convs
    conn = open_sync(db)
    t0 = time.perf_counter()
    try:
        conn.execute("PRAGMA synchronous=NORMAL")  # bulk load; not what is measured
        for start in range(0, len(stream), RAW_TX_ROWS):
            conn.execute("BEGIN IMMEDIATE")
            for msg in stream[start : start + RAW_TX_ROWS]:
                append(conn, msg)
            # The indexer's work, as the writer does it (same functions, same batch size as this load):
            # the rows, then a merge step (our tables do not merge on their own).
            if not reference_layout:
                fts_index.index_pending(conn, RAW_TX_ROWS)
                fts_merge.merge_step(conn, fts_merge.IDLE_PAGES)
            conn.execute("COMMIT")
        # and what the writer's idle time merges once the rows are in
        if not reference_layout:
            fts_merge.merge_all(conn)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return len(stream), time.perf_counter() - t0


def pick_queries(conn: sqlite3.Connection, content_words: set[str], total: int) -> list[tuple[str, int]]:
    """Content words whose document frequency is nearest 10%, 1%, 0.1% and 0.01% of messages."""
    conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.bench_vocab USING fts5vocab(main, messages_fts, 'row')")
    df = {str(t): int(d) for t, d in conn.execute("SELECT term, doc FROM temp.bench_vocab")}
    conn.execute("DROP TABLE temp.bench_vocab")
    candidates = [(w, d) for w, d in df.items() if w in content_words and len(w) >= 4]
    picked: list[tuple[str, int]] = []
    for frac in (0.10, 0.01, 0.001, 0.0001):
        want = frac * total
        word, d = min(candidates, key=lambda wd: (abs(wd[1] - want), wd[0]))
        candidates.remove((word, d))
        picked.append((word, d))
    return picked


def query_set(conn: sqlite3.Connection, content_words: set[str], total: int) -> list[tuple[str, int]]:
    """The discovery queries: four words by frequency, two of them ANDed, a prefix, a part of a word, CJK."""
    queries = pick_queries(conn, content_words, total)
    (w10, _), (w1, _), (w01, _) = queries[0], queries[1], queries[2]
    # Matching messages in the index the query runs on: the word index, or the trigram one for a
    # part of a word and for CJK.
    extra = [(f"{w10} {w1}", "messages_fts"), (f"{w1[:4]}*", "messages_fts"), (w01[1:5], "messages_fts_trigram"),
             (CJK_TERM, "messages_fts_trigram")]

    def count(q: str, table: str) -> int:
        sql = f"SELECT count(*) FROM {table} WHERE {table} MATCH ?"
        return int(conn.execute(sql, (sanitize_fts5_query(q),)).fetchone()[0])

    return queries + [(q, count(q, table)) for q, table in extra]


CJK_TERM = "全文検索"
SUBSTRING_QUERY = 6  # its place in query_set()


def _timed(fn: Callable[[], Any], repeats: int) -> list[float]:
    fn()  # warm the statement cache and the page cache
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


@dataclass
class SearchResult:
    messages: int
    sessions: int
    build_seconds: float
    db_mb: float
    per_query: list[tuple[str, int, float, int]]  # query, matching messages, p50 s, sessions returned
    discovery: list[float]
    scroll: list[float]
    bytes_per_message: float


def run_search(db: Path, gen: TextGen) -> SearchResult:
    total, build_s = build_search_db(db, gen)
    db_mb = db.stat().st_size / 1024 / 1024
    bytes_per_message = db.stat().st_size / total
    conn = open_readonly_connection(db)
    try:
        queries = query_set(conn, gen.content_words, total)
        per_query = []
        discovery: list[float] = []
        for q, d in queries:
            found = len(store_search.search_sessions(conn, q))
            times = _timed(partial(store_search.search_sessions, conn, q), SEARCH_REPEATS)
            discovery += times
            per_query.append((q, d, statistics.median(times), found))
        rng = random.Random(SEED + 7)
        ids = conn.execute("SELECT id, session_id FROM messages").fetchall()
        anchors = [(int(r[0]), str(r[1])) for r in (ids[rng.randrange(len(ids))] for _ in range(SCROLL_CALLS))]
        scroll: list[float] = []
        store_search.messages_around(conn, anchors[0][1], anchors[0][0], window=10)
        for mid, sid in anchors:
            t = time.perf_counter()
            store_search.messages_around(conn, sid, mid, window=10)
            scroll.append(time.perf_counter() - t)
    finally:
        conn.close()
    return SearchResult(total, SEARCH_SESSIONS, build_s, db_mb, per_query, discovery, scroll, bytes_per_message)


# ------------------------------------------------------------ layout compare

LAYOUT_MESSAGES = max(2000, round(20_000 * SCALE))
LAYOUT_SESSIONS = max(40, round(400 * SCALE))


@dataclass
class LayoutResult:
    messages: int
    inline_bytes: int
    external_bytes: int
    convert_seconds: float
    same: list[tuple[str, bool]]  # query, same top-20 sessions and messages
    discovery_inline_ms: float  # discovery p50 over the query set, the reference's layout
    discovery_external_ms: float  # the same after the conversion


def _top20(conn: sqlite3.Connection, queries: list[str]) -> dict[str, tuple[list[str], list[int]]]:
    out = {}
    for q in queries:
        sessions = [str(r["session_id"]) for r in store_search.search_sessions(conn, q, limit=20)]
        msgs = [int(r["id"]) for r in store_search.search_messages(conn, q, limit=20, role_filter=["user", "assistant"])]
        out[q] = (sessions, msgs)
    return out


async def _convert(db: Path) -> float:
    async with StateStore(db) as store:
        t0 = time.perf_counter()
        assert await store.catch_up_index()
        took = time.perf_counter() - t0
        await store.vacuum()  # the dropped inline tables' pages go back to the disk
    return took


def run_layout_compare(db: Path, gen: TextGen) -> LayoutResult:
    """The same corpus in the reference's inline layout, then converted online to ours: top-20s and bytes."""
    total, _ = build_search_db(db, gen, LAYOUT_MESSAGES, LAYOUT_SESSIONS, reference_layout=True)
    inline_bytes = db.stat().st_size
    conn = open_readonly_connection(db)
    try:
        queries = [q for q, _ in query_set(conn, gen.content_words, total)]
        before = _top20(conn, queries)
        inline_ms = _discovery_p50(conn, queries)
    finally:
        conn.close()
    convert_s = _convert_sync(db)
    conn = open_readonly_connection(db)
    try:
        after = _top20(conn, queries)
        external_ms = _discovery_p50(conn, queries)
    finally:
        conn.close()
    return LayoutResult(total, inline_bytes, db.stat().st_size, convert_s,
                        [(q, before[q] == after[q]) for q in queries], inline_ms, external_ms)


def _discovery_p50(conn: sqlite3.Connection, queries: list[str]) -> float:
    """Discovery timed side by side in both layouts: one run, one load."""
    times: list[float] = []
    for q in queries:
        times += _timed(partial(store_search.search_sessions, conn, q), 9)
    return statistics.median(times) * 1000


def _convert_sync(db: Path) -> float:
    return asyncio.run(_convert(db))


# ------------------------------------------------------------------ report


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def write_table(results: list[Result]) -> None:
    print(
        f"{'mode':<14} {'msg/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'lag p99 ms':>10} {'max WAL MB':>10} "
        f"{'CPU ms/msg':>10}  notes"
    )
    for r in results:
        notes = ""
        if r.notes.get("commits"):
            cps = r.notes["checkpoints"]
            notes = (
                f"commits={r.notes['commits']} avg_batch={r.notes['avg_batch']:.1f} max_batch={r.notes['max_batch']} "
                f"checkpoints={cps.get('PASSIVE', 0)} passive/{cps.get('TRUNCATE', 0)} truncate; "
                f"{r.notes['index_waiting']} unindexed at the last ack, indexed {r.notes['index_catch_up_s']:.1f} s later "
                f"({r.messages / (r.seconds + r.notes['index_catch_up_s']):.0f} msg/s with it)"
            )
        elif "synchronous_default" in r.notes:
            notes = f"PRAGMA synchronous default here = {r.notes['synchronous_default']} (2 = FULL)"
        elif r.mode == f"raw-{REF_TX_ROWS}":
            notes = "reference: the most a group commit of 16 one-at-a-time producers can reach"
        lag = "n/a" if r.lag_p99_ms is None else f"{r.lag_p99_ms:.2f}"
        print(
            f"{r.mode:<14} {r.rate:>7.0f} {r.p50_ms:>8.2f} {r.p99_ms:>8.2f} {lag:>10} {r.wal_mb:>10.1f} "
            f"{r.cpu_ms_per_msg:>10.3f}  {notes}"
        )


def main() -> int:
    logs = _quiet_logs()
    try:
        return _main()
    finally:
        structlog.configure(**logs)


def _main() -> int:
    gen = TextGen(random.Random(SEED))
    sids = session_ids("w", WRITE_SESSIONS)
    convs = [conversation(gen, sid, WRITE_PER_SESSION, None) for sid in sids]
    stream = interleave(convs)
    sizes = {r: [len(c["content"]) for _, c in stream if c["role"] == r] for r in ("user", "assistant", "tool")}
    calls = [len(json.dumps(c["tool_calls"])) for _, c in stream if c.get("tool_calls")]
    print(
        f"SQLite {sqlite3.sqlite_version}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"BENCH_SCALE={SCALE:g}, load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"write mix: {len(stream)} messages over {WRITE_SESSIONS} sessions; mean chars "
        + ", ".join(f"{role} {statistics.mean(v):.0f} (x{len(v)})" for role, v in sizes.items())
        + f"; tool_calls JSON {statistics.mean(calls):.0f} chars on {len(calls)} assistant messages"
    )
    gc.collect()
    gc.freeze()  # the generated corpus is not the system under test

    modes: list[tuple[str, Callable[[Path], Result]]] = [
        ("baseline", partial(run_baseline, stream=stream)),
        ("raw", partial(run_raw, stream=stream)),
        ("raw-ref", partial(run_raw, stream=stream, rows=REF_TX_ROWS)),
        *((f"writer{n}", partial(run_writer, convs=convs, producers=n)) for n in PRODUCERS),
    ]
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-"))
    results: list[Result] = []
    try:
        for name, fn in modes:
            db = tmp / name / "state.db"
            prepare_db(db, sids, reference_layout=not name.startswith("writer"))
            # The mode before wrote hundreds of MB: without this its pages are still being written
            # back while the next mode runs, and that mode's fsyncs (its commit p99) pay for them.
            os.sync()
            result = fn(db)
            results.append(result)
            print(f"  {result.mode}: {result.seconds:.1f} s", flush=True)
            shutil.rmtree(db.parent, ignore_errors=True)
        print(f"  load average after the write modes: {os.getloadavg()[0]:.2f}")
        search = run_search(tmp / "search" / "state.db", TextGen(random.Random(SEED + 1)))
        layouts = run_layout_compare(tmp / "layout" / "state.db", TextGen(random.Random(SEED + 2)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    by = {r.mode: r for r in results}
    base, raw, ref = by["baseline"], by[f"raw-{RAW_TX_ROWS}"], by[f"raw-{REF_TX_ROWS}"]
    w16, w256 = by["writer@16"], by["writer@256"]
    w1 = by["writer@1"]
    r1 = w1.rate / base.rate
    r16 = w16.rate / base.rate
    r256 = w256.rate / raw.rate
    bytes_ratio = layouts.external_bytes / layouts.inline_bytes
    # The discovery set: words by frequency, AND, prefix, CJK. The part-of-a-word query
    # (index 6) ranks on a trigram index without tool results: its order may shift (README).
    judged = [s for i, s in enumerate(layouts.same) if i != SUBSTRING_QUERY]
    same = sum(ok for _, ok in judged)
    writers = [r for r in results if r.loop_lags is not None]
    worst_lag = max(writers, key=lambda r: r.lag_p99_ms or 0.0)
    worst_wal = max(writers, key=lambda r: r.wal_max_bytes)
    disc_p50 = statistics.median(search.discovery) * 1000
    scroll_p50 = statistics.median(search.scroll) * 1000
    slowest = max(search.per_query, key=lambda q: q[2])

    print()
    print("writes (latency = submit to ack per message; lag = 1 ms ticker oversleep; WAL sampled every 2 ms)")
    write_table(results)
    print(
        "  sync modes (baseline, raw-*): the reference's layout, each row indexed by its insert trigger, "
        "as before; writer modes: indexed after the commit"
    )
    print(
        f"  ceiling for ratio_vs_baseline_16 on this machine: raw-{REF_TX_ROWS} / baseline = "
        f"{ref.rate / base.rate:.2f}; writer@16 reaches {w16.rate / ref.rate:.2f} of raw-{REF_TX_ROWS}"
    )
    print()
    print(
        f"search: {search.messages} messages in {search.sessions} sessions ({search.db_mb:.0f} MB, built in "
        f"{search.build_seconds:.0f} s); discovery = search_sessions, {SEARCH_REPEATS} calls per query; "
        f"scroll = messages_around window 10 at {SCROLL_CALLS} random messages"
    )
    for q, d, p50, found in search.per_query:
        print(f"  discovery {q!r:<24} {d:>6} matching messages  p50 {p50 * 1000:7.2f} ms  ({found} sessions returned)")
    print(
        f"  discovery p99 {pct(search.discovery, 0.99) * 1000:.2f} ms; "
        f"scroll p99 {pct(search.scroll, 0.99) * 1000:.3f} ms"
    )
    print(
        f"  bytes per message: {search.bytes_per_message:.0f} here; before this layout (main at 7ff2b1d, the same "
        f"build, no CJK share) {TODAY_BYTES_PER_MESSAGE}"
    )
    print()
    print(
        f"layouts: {layouts.messages} messages in the reference's inline layout ({layouts.inline_bytes / 1e6:.1f} MB), "
        f"converted online to ours in {layouts.convert_seconds:.1f} s "
        f"({layouts.messages / max(layouts.convert_seconds, 1e-9):.0f} msg/s), then VACUUM: "
        f"{layouts.external_bytes / 1e6:.1f} MB = {bytes_ratio:.2f}x"
    )
    for i, (q, ok) in enumerate(layouts.same):
        note = "  (a part of a word: ranked without tool results, not judged)" if i == SUBSTRING_QUERY else ""
        print(f"  top-20 sessions and messages {q!r:<24} {'same' if ok else 'DIFFERENT'}{note}")
    print(f"  discovery p50 over the query set: {layouts.discovery_inline_ms:.2f} ms in the reference's layout, "
          f"{layouts.discovery_external_ms:.2f} ms in ours")
    print()
    print(f"storage.ratio_vs_baseline_1={r1:.2f}")
    print(f"storage.commit_p99_16_ms={w16.p99_ms:.2f}")
    print(f"storage.bytes_per_message={search.bytes_per_message:.0f}")
    print(f"storage.bytes_ratio_vs_inline={bytes_ratio:.2f}")
    print(f"storage.same_top20={same}/{len(judged)}")
    print(f"storage.discovery_ratio_vs_inline={layouts.discovery_external_ms / layouts.discovery_inline_ms:.2f}")
    print(f"storage.ratio_vs_baseline_16={r16:.2f}")
    print(f"storage.ratio_vs_raw_256={r256:.2f}")
    print(f"storage.search_discovery_p50_ms={disc_p50:.2f}")
    print(f"storage.search_scroll_p50_ms={scroll_p50:.3f}")
    print()
    targets = [
        ("commit_p99_16_ms <= 10", f"{w16.p99_ms:.2f} ms", w16.p99_ms <= 10.0),
        ("ratio_vs_baseline_1 >= 1.0", f"{r1:.2f}", r1 >= 1.0),
        ("ratio_vs_baseline_16 >= 1.8", f"{r16:.2f}", r16 >= 1.8),
        (
            "p99 commit latency @16 <= baseline p99 / 5",
            f"{w16.p99_ms:.2f} ms vs {base.p99_ms:.2f} / 5 = {base.p99_ms / 5:.2f} ms",
            w16.p99_ms <= base.p99_ms / 5,
        ),
        ("ratio_vs_raw_256 >= 0.9", f"{r256:.2f}", r256 >= 0.9),
        (
            "event-loop lag p99 <= 10 ms",
            f"worst {worst_lag.lag_p99_ms or 0.0:.2f} ms ({worst_lag.mode})",
            all((r.lag_p99_ms or 0.0) <= 10.0 for r in writers),
        ),
        (
            f"WAL never above {WAL_LIMIT_MB:.0f} MB",
            f"max {worst_wal.wal_mb:.1f} MB ({worst_wal.mode})",
            worst_wal.wal_mb <= WAL_LIMIT_MB,
        ),
        (
            "search discovery p50 <= 20 ms",
            f"{disc_p50:.2f} ms over all queries; slowest query p50 {slowest[2] * 1000:.2f} ms ({slowest[0]!r})",
            disc_p50 <= 20.0,
        ),
        ("search scroll p50 <= 2 ms", f"{scroll_p50:.3f} ms", scroll_p50 <= 2.0),
        (
            "bytes per message <= 0.5x the inline layout (same corpus, this run)",
            f"{bytes_ratio:.2f}x; {search.bytes_per_message:.0f} B vs {TODAY_BYTES_PER_MESSAGE} B before "
            f"= {search.bytes_per_message / TODAY_BYTES_PER_MESSAGE:.2f}x",
            bytes_ratio <= 0.5,
        ),
        ("same top-20 for every discovery query after conversion", f"{same}/{len(judged)}",
         same == len(judged)),
    ]
    print("targets:")
    for name, measured, ok in targets:
        print(f"  {_verdict(ok)}  {name}: {measured}")
    return 0
