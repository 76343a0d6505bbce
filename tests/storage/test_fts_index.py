"""Deferred FTS indexing (storage/sqlite/_fts_index.py): a message is found the moment its
write returns, indexed afterwards; deletes keep the index exact; a reference reader and a
reference writer share the file; the online move from the reference's layout keeps every
search result and survives kill -9."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from storage import StateStore, WriterSettings, fts_layout, ops
from storage.sqlite._schema import BASE_TABLES_DDL, INDEXES_DDL, REFERENCE_FTS_TRIGGERS_DDL

from ._procs import HERE, spawn

# The indexer never runs by itself: what is found before catch_up_index() came from the tail.
HOLD = WriterSettings(synchronous="NORMAL", index_lag_max=3600.0, index_idle_after=3600.0)
FAST = WriterSettings(synchronous="NORMAL")
CONVERT_CHILD = HERE / "_convert_child.py"

WORDS = "docker kubernetes postgres latency rollback firmware gradient invoice sqlite terraform".split()
CJK = ["机器学习模型", "北海道の雪まつり", "全文検索エンジン", "数据库索引"]


def corpus(n: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    """``n`` messages: (session, role, content, extra columns); each has its own token ``uniqN``."""
    out = []
    for i in range(n):
        role = ("user", "assistant", "tool", "assistant")[i % 4]
        words = " ".join(WORDS[(i * k + 3) % len(WORDS)] for k in range(1, 6))
        content = f"uniq{i} {words} networking{i % 7}"
        if i % 5 == 0:
            content += f" {CJK[i % len(CJK)]}"
        extra: dict[str, Any] = {}
        if role == "tool":
            extra = {"tool_name": "terminal", "tool_call_id": f"c{i}"}
        elif i % 4 == 1:
            extra = {"tool_calls": [{"id": f"c{i + 1}", "type": "function",
                                     "function": {"name": "web_search", "arguments": f'{{"q": "quux{i}"}}'}}]}
        out.append((f"s{i % 6}", role, content, extra))
    return out


QUERIES = ["docker", "docker latency", "kube*", "etwork", "雪まつり", "全文検索", '"postgres latency"',
           "web_search", "terminal", "rollback NOT invoice"]


async def fill(store: StateStore, n: int) -> list[int]:
    def write(conn: sqlite3.Connection) -> list[int]:
        for s in range(6):
            ops.create_session(conn, f"s{s}", "cli", started_at=1000.0 + s)
        return [ops.append_message(conn, sid, role, content, timestamp=2000.0 + i, **extra)
                for i, (sid, role, content, extra) in enumerate(corpus(n))]

    return await store.write(write)


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def indexed(conn: sqlite3.Connection, table: str) -> set[int]:
    """The rows the index itself holds (one _docsize row each), not the messages table."""
    return {r[0] for r in conn.execute(f"SELECT id FROM {table}_docsize")}


def reference_search(conn: sqlite3.Connection, table: str, fts_query: str) -> set[int]:
    """How a reader of the reference's v11 schema searches: its own SQL, no help from us."""
    rows = conn.execute(
        f"SELECT m.id, snippet({table}, 0, '>>>', '<<<', '...', 40) FROM {table} "
        f"JOIN messages m ON m.id = {table}.rowid WHERE {table} MATCH ? ORDER BY rank",
        (fts_query,),
    ).fetchall()
    assert all(r[1] is not None for r in rows)
    return {r[0] for r in rows}


async def results(store: StateStore) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for q in QUERIES:
        sessions = [r["session_id"] for r in await store.search_sessions(q, limit=20)]
        messages = [(r["id"], r["snippet"]) for r in
                    await store.search_messages(q, limit=20, role_filter=["user", "assistant"])]
        out[q] = (sessions, messages)
    return out


# --------------------------------------------------------------- the tail


async def test_a_message_is_found_the_moment_its_write_returns(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=HOLD) as store:
        ids = await fill(store, 12)
        with connect(db_path) as conn:
            assert indexed(conn, "messages_fts") == set()  # nothing indexed on the commit path
        by_id = dict(zip(ids, corpus(12), strict=True))
        assert {r["id"] for r in await store.search_messages("uniq5")} == {ids[5]}
        docker = {i for i, (_, _, content, _) in by_id.items() if "docker" in content}
        assert docker and {r["id"] for r in await store.search_messages("docker", limit=50)} == docker
        # Substring and CJK through the trigram tail: what the trigram index covers (no tool results).
        etwork = {i for i, (_, role, _, _) in by_id.items() if role != "tool"}
        assert {r["id"] for r in await store.search_messages("etwork", limit=50)} == etwork
        snow = {i for i, (_, role, c, _) in by_id.items() if "雪まつり" in c and role != "tool"}
        assert snow and {r["id"] for r in await store.search_messages("雪まつり")} == snow
        assert [r["session_id"] for r in await store.search_sessions("uniq7")] == ["s1"]
        before = await results(store)

        assert await store.catch_up_index()
        with connect(db_path) as conn:
            assert indexed(conn, "messages_fts") == set(ids)
            assert indexed(conn, "messages_fts_trigram") == {i for i, c in by_id.items() if c[1] != "tool"}
        assert await results(store) == before


async def test_the_writer_indexes_in_its_idle_time(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=FAST) as store:
        ids = await fill(store, 8)
        # No catch_up_index: the writer gets there by itself. A read barrier: wait on the stats.
        for _ in range(3000):  # up to 30 s on a loaded machine; not a timing assertion
            if store.writer.stats.indexed_rows >= len(ids):
                break
            await asyncio.sleep(0.01)
        with connect(db_path) as conn:
            assert indexed(conn, "messages_fts") == set(ids)


# --------------------------------------------------- the reference's side


async def test_a_reference_reader_finds_every_message_once_indexed(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=HOLD) as store:
        ids = await fill(store, 40)
        assert await store.catch_up_index()
        rows = corpus(40)
        with connect(db_path) as conn:
            for mid, (_, role, content, _) in zip(ids, rows, strict=True):
                token = content.split()[0]
                assert reference_search(conn, "messages_fts", token) == {mid}
                if role != "tool":
                    assert reference_search(conn, "messages_fts_trigram", f'"{token} "') == {mid}
            assert reference_search(conn, "messages_fts", "tool_name:terminal") == {
                m for m, r in zip(ids, rows, strict=True) if r[1] == "tool"}
            # Every row reads as written.
            got = [tuple(r) for r in conn.execute("SELECT id, session_id, role, content FROM messages ORDER BY id")]
            assert got == [(m, s, role, c) for m, (s, role, c, _) in zip(ids, rows, strict=True)]


async def test_rows_a_reference_writer_adds_are_indexed_too(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=HOLD) as store:
        await fill(store, 4)
        assert await store.catch_up_index()
        with connect(db_path) as ro:
            triggers = sorted(ro.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall())
        # The reference's SessionDB opening the file: its DDL, IF NOT EXISTS, then its inserts.
        other = sqlite3.connect(db_path, timeout=10.0, isolation_level=None)
        try:
            for ddl in (*BASE_TABLES_DDL, *INDEXES_DDL, *REFERENCE_FTS_TRIGGERS_DDL):
                other.execute(ddl)
            other.execute("BEGIN IMMEDIATE")
            added = [other.execute(
                "INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s0', 'user', ?, 3000.0)",
                (f"written by the reference zebrafish{i}",)).lastrowid for i in range(3)]
            other.execute("COMMIT")
        finally:
            other.close()
        with connect(db_path) as ro:
            # It added no trigger of its own: ours are there under its names.
            assert sorted(ro.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()) == triggers
        assert {r["id"] for r in await store.search_messages("zebrafish1")} == {added[1]}  # the tail
        assert await store.catch_up_index()
        with connect(db_path) as ro:
            for i, mid in enumerate(added):
                assert reference_search(ro, "messages_fts", f"zebrafish{i}") == {mid}
            assert set(added) <= indexed(ro, "messages_fts")


# ------------------------------------------------------------------ deletes


async def test_deletes_and_updates_keep_the_index_exact(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=HOLD) as store:
        ids = await fill(store, 24)
        assert await store.catch_up_index()
        later = await fill_more(store)  # committed, not indexed
        # An update of an indexed row and of an unindexed one.
        await store.write(lambda c: c.execute("UPDATE messages SET content = 'walrus replaced' WHERE id = ?", (ids[0],)))
        await store.write(lambda c: c.execute("UPDATE messages SET content = 'narwhal replaced' WHERE id = ?",
                                              (later[0],)))
        # Deletes through the storage functions: some rows indexed, some not.
        assert await store.clear_messages("s1") > 0
        assert await store.delete_session("s2")
        assert await store.catch_up_index()
        with connect(db_path) as conn:
            alive = {r[0]: r[1] for r in conn.execute("SELECT id, role FROM messages")}
            assert indexed(conn, "messages_fts") == set(alive)
            assert indexed(conn, "messages_fts_trigram") == {i for i, role in alive.items() if role != "tool"}
            for table in ("messages_fts", "messages_fts_trigram"):
                # No stale entry: every hit names a live row.
                assert {r[0] for r in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH 'docker'")} <= set(alive)
                assert reference_search(conn, table, '"walrus"') == ({ids[0]} if ids[0] in alive else set())
            assert reference_search(conn, "messages_fts", "uniq0") == set()
            assert reference_search(conn, "messages_fts", "narwhal") == ({later[0]} if later[0] in alive else set())
        for table in ("messages_fts", "messages_fts_trigram"):
            await store.write(lambda c, t=table: c.execute(f"INSERT INTO {t}({t}, rank) VALUES ('integrity-check', 0)"))


async def fill_more(store: StateStore) -> list[int]:
    def write(conn: sqlite3.Connection) -> list[int]:
        return [ops.append_message(conn, f"s{i % 6}", "user", f"late message {i} docker", timestamp=5000.0 + i)
                for i in range(12)]

    return await store.write(write)


# -------------------------------------------------------------- conversion


async def _reference_file(db_path: Path, n: int) -> dict[str, Any]:
    """A file in the reference's layout (inline tables, insert triggers) and our search results on it."""
    async with StateStore(db_path, writer_settings=FAST) as store:
        await fill(store, n)
        assert await store.catch_up_index()
        want = await results(store)
        await store.write(fts_layout.install_reference_layout)
    with connect(db_path) as conn:
        assert conn.execute("SELECT count(*) FROM messages_fts_content").fetchone()[0] == n  # inline: a copy
    return want


async def test_search_results_are_equal_before_and_after_the_conversion(db_path: Path) -> None:
    want = await _reference_file(db_path, 60)
    async with StateStore(db_path, writer_settings=HOLD) as store:
        assert store.writer.stats.fts_conversion == (0, 60)
        assert await results(store) == want  # served from the inline tables while converting
        assert await store.catch_up_index()
        assert store.writer.stats.fts_conversion is None
        assert await results(store) == want
    with connect(db_path) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert "messages_fts_content" not in names and not any(n.endswith("_next") for n in names)
        assert conn.execute("SELECT value FROM state_meta WHERE key = 'fts_layout'").fetchone()[0] == "external"


async def test_the_conversion_resumes_after_kill_9(db_path: Path, tmp_path: Path) -> None:
    n = 400
    want = await _reference_file(db_path, n)
    async with spawn(CONVERT_CHILD, str(db_path), log_dir=tmp_path / "logs") as child:
        await child.expect("READY")
        while True:
            line = await child.expect("PROGRESS")
            done, total = map(int, line.split()[1:])
            assert total == n
            if 0 < done < total:
                break
        await child.kill()
    with connect(db_path) as conn:
        meta = dict(conn.execute("SELECT key, value FROM state_meta").fetchall())
        assert meta["fts_layout"] == "inline" and 0 < int(meta["fts_convert_through"]) < n
    async with StateStore(db_path, writer_settings=HOLD) as store:
        progress = store.writer.stats.fts_conversion
        assert progress is not None and progress[0] >= done  # resumed, not restarted
        assert await store.catch_up_index()
        assert store.writer.stats.fts_conversion is None
        assert await results(store) == want
    with connect(db_path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert len(indexed(conn, "messages_fts")) == n


async def test_a_reference_writer_that_replaced_our_triggers_is_undone_at_the_next_open(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=HOLD) as store:
        ids = await fill(store, 10)
        assert await store.catch_up_index()
    # A tool that drops and recreates the reference's own triggers, then writes (indexed twice: by its
    # trigger now, and by nobody else's rule we could tell apart).
    other = sqlite3.connect(db_path, isolation_level=None)
    try:
        for name in ("messages_fts_insert", "messages_fts_delete", "messages_fts_update"):
            other.execute(f"DROP TRIGGER {name}")
        for ddl in REFERENCE_FTS_TRIGGERS_DDL:
            other.execute(ddl)
        added = other.execute("INSERT INTO messages (session_id, role, content, timestamp) "
                              "VALUES ('s0', 'user', 'okapi arrives', 3000.0)").lastrowid
    finally:
        other.close()
    async with StateStore(db_path, writer_settings=HOLD) as store:
        report = store.writer.migration
        assert report is not None and report.fts_triggers_replaced
        assert {r["id"] for r in await store.search_messages("okapi")} == {added}  # the tail, while re-indexing
        assert await store.catch_up_index()
        assert {r["id"] for r in await store.search_messages("okapi")} == {added}
    with connect(db_path) as conn:
        assert indexed(conn, "messages_fts") == {*ids, added}
        assert reference_search(conn, "messages_fts", "okapi") == {added}
        triggers = {r[0]: r[1] for r in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")}
        assert "WHEN 0" in triggers["messages_fts_insert"]


# ------------------------------------------------------------ under load


def watermark(path: Path) -> int:
    with connect(path) as conn:
        row = conn.execute("SELECT value FROM state_meta WHERE key = 'fts_indexed_through'").fetchone()
    return int(row[0]) if row is not None else 0


# Writes never pause long enough for idle work: only the slices between batches can index.
BUSY = WriterSettings(synchronous="NORMAL", index_lag_max=0.0, index_idle_after=3600.0,
                      idle_truncate_after=3600.0, checkpoint_every_commits=10**6, index_slice=3)


async def test_the_watermark_advances_while_writes_never_stop(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=BUSY) as store:
        await fill(store, 4)

        async def producer(p: int) -> None:
            for i in range(25):
                await store.append_message(f"s{p}", "user", f"steady stream {p} {i} docker")

        await asyncio.gather(*(producer(p) for p in range(4)))
        stats = store.writer.stats
        total = 4 + 100
        # Each batch commits the slice indexed after the one before it (the last slice waits for the next).
        assert stats.commits > 2
        assert watermark(db_path) >= min(total - 1, BUSY.index_slice * (stats.commits - 2))
        assert stats.indexed_rows >= watermark(db_path) > 0
        with connect(db_path) as conn:
            assert indexed(conn, "messages_fts") == set(range(1, watermark(db_path) + 1))
        # The newest rows, not indexed yet, are found all the same.
        found = {r["id"] for r in await store.search_messages("steady stream", limit=200)}
        assert len(found) == 100


async def test_a_failed_batch_undoes_the_slice_it_carried_and_the_rows_are_indexed_later(db_path: Path) -> None:
    async with StateStore(db_path, writer_settings=BUSY) as store:
        ids = await fill(store, 20)  # its batch is followed by a slice, left open for the next batch

        def fails(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES ('s0', 'user', 'x', 1)")
            raise RuntimeError("this op fails")

        try:
            await store.write(fails)
        except RuntimeError:
            pass
        else:
            raise AssertionError("the op's error was not raised")
        assert watermark(db_path) == 0  # the slice went down with the batch
        later = await store.append_message("s1", "user", "after the failure okapi")
        assert watermark(db_path) > 0  # a later batch carried a slice again
        assert await store.catch_up_index()
        with connect(db_path) as conn:
            assert indexed(conn, "messages_fts") == {*ids, later}
            assert conn.execute("SELECT count(*) FROM messages WHERE content = 'x'").fetchone()[0] == 0
        for table in ("messages_fts", "messages_fts_trigram"):
            await store.write(lambda c, t=table: c.execute(f"INSERT INTO {t}({t}, rank) VALUES ('integrity-check', 0)"))
