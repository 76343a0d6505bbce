"""The same top 20 from both backends on a fixed corpus: the bench's message mix (seeded text of
Zipf-distributed words, tool calls and results, CJK phrases) and its discovery query set (words
at about 10 %, 1 % and 0.2 % of the messages, two of them ANDed, a prefix, a part of a word, a
CJK term), as ``search_sessions(limit=20)`` and ``search_messages(limit=20)`` over user and
assistant messages return them: the same sessions and best hits in the same order.

Equal scores (the mix repeats texts) fall back to the newest message on both, so the order is
fully determined: PostgreSQL ranks with FTS5's bm25 formula on the same token counts.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import storage.postgres
import storage.sqlite
from bench.storage import SEED, TextGen, conversation
from storage import StateStore, WriterSettings

SESSIONS, PER_SESSION = 60, 40
CJK_TERM = "全文検索"
_WORD = re.compile(r"[^\W_]+")
_COLUMNS = ("id", "session_id", "role", "content", "tool_call_id", "tool_calls", "tool_name", "timestamp")


def _corpus() -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], TextGen]:
    gen = TextGen(random.Random(SEED + 26))
    sessions: list[tuple[Any, ...]] = []
    rows: list[tuple[Any, ...]] = []
    for s in range(SESSIONS):
        sid = f"p{s:03d}"
        parent = f"p{s - 1:03d}" if s % 10 == 9 else None  # some continue the one before: one per lineage
        start = 1_700_000_000.0 + s * 3600
        sessions.append((sid, "cli" if s % 3 else "telegram", parent, start))
        for _, cols in conversation(gen, sid, PER_SESSION, start, cjk=0.05):
            calls = cols.get("tool_calls")
            rows.append((len(rows) + 1, sid, cols["role"], cols["content"], cols.get("tool_call_id"),
                         None if calls is None else json.dumps(calls, ensure_ascii=False, separators=(",", ":")),
                         cols.get("tool_name"), cols["timestamp"]))
    return sessions, rows, gen


def _queries(rows: list[tuple[Any, ...]], content_words: set[str]) -> list[str]:
    df: Counter[str] = Counter()
    for row in rows:
        df.update({w.lower() for col in (row[3], row[5], row[6]) if col for w in _WORD.findall(col)})
    candidates = sorted((w, d) for w, d in df.items() if w in content_words and len(w) >= 5)
    picked: list[str] = []
    for share in (0.10, 0.01, 0.002):
        word, _ = min(candidates, key=lambda wd: (abs(wd[1] - share * len(rows)), wd[0]))
        candidates = [c for c in candidates if c[0] != word]
        picked.append(word)
    w10, w1, w01 = picked
    return [*picked, f"{w10} {w1}", f"{w1[:4]}*", w01[1:5], CJK_TERM]


def _load(conn: Any, marker: str, sessions: list[tuple[Any, ...]], rows: list[tuple[Any, ...]]) -> None:
    cur = conn.cursor()  # both drivers' cursors take executemany
    one = ", ".join([marker] * 4)
    cur.executemany(f"INSERT INTO sessions (id, source, parent_session_id, started_at) VALUES ({one})", sessions)
    many = ", ".join([marker] * len(_COLUMNS))
    cur.executemany(f"INSERT INTO messages ({', '.join(_COLUMNS)}) VALUES ({many})", rows)


def _top20(conn: Any, search: Any, queries: list[str]) -> dict[str, tuple[list[tuple[str, int]], list[int]]]:
    out = {}
    for q in queries:
        found = search.search_sessions(conn, q, limit=20)
        hits = search.search_messages(conn, q, limit=20, role_filter=("user", "assistant"))
        out[q] = ([(r["session_id"], r["match_message_id"]) for r in found], [r["id"] for r in hits])
    return out


async def test_top20_of_discovery_and_search_are_the_same_on_both_backends(tmp_path: Path, pg_url: str) -> None:
    sessions, rows, gen = _corpus()
    queries = _queries(rows, gen.content_words)
    async with StateStore(tmp_path / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as lite:
        await lite.write(lambda c: _load(c, "?", sessions, rows))
        await lite.catch_up_index()
        expected = await lite.read(lambda c: _top20(c, storage.sqlite.search, queries))
    async with storage.postgres.PgStore(pg_url) as pg:
        await pg.write(lambda c: _load(c, "%s", sessions, rows))
        got = await pg.read(lambda c: _top20(c, storage.postgres.search, queries))
    for q in queries:
        assert expected[q][0], f"{q!r} finds nothing: the corpus no longer exercises it"
    assert {q: got[q] for q in queries} == {q: expected[q] for q in queries}


@pytest.mark.parametrize("query", ["the", "zzzz*", '"of the"', "error OR warning", "the NOT and"])
async def test_common_words_and_operators_rank_alike(tmp_path: Path, pg_url: str, query: str) -> None:
    """Stop words (every message has them: IDF near zero), phrases and operators, on a small corpus."""
    sessions, rows, _ = _corpus()
    rows = rows[: 12 * PER_SESSION]
    sessions = sessions[:12]
    async with StateStore(tmp_path / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as lite:
        await lite.write(lambda c: _load(c, "?", sessions, rows))
        await lite.catch_up_index()
        expected = await lite.read(lambda c: _top20(c, storage.sqlite.search, [query]))
    async with storage.postgres.PgStore(pg_url) as pg:
        await pg.write(lambda c: _load(c, "%s", sessions, rows))
        got = await pg.read(lambda c: _top20(c, storage.postgres.search, [query]))
    assert got == expected
