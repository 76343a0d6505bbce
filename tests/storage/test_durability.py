"""Durability of state.db: real SQLite files, real subprocesses, no mocks.

* every acknowledged message is stored exactly once, in order (property test);
* acknowledged appends survive SIGKILL, and the file stays intact;
* another process writing the same file is waited for, not failed;
* the busy budget ends in a clear ``StorageBusyError``, and the writer recovers;
* a second daemon on the same home is refused through the sidecar lock, and a
  store that was refused works once the lock is free;
* a full disk fails only the op that did not fit.

Child processes live in ``_crash_child.py``, ``_sqlite_peer.py`` and
``_store_holder.py``; they talk to the test over stdin/stdout, so every
"the lock is held now" is known for certain rather than guessed from a sleep.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import (
    StateStore,
    StorageBusyError,
    StorageError,
    StorageFullError,
    StorageLockedError,
    WriterSettings,
    lock_path_for,
)

from ._procs import CRASH_CHILD, SQLITE_PEER, STORE_HOLDER, spawn
from ._support import WAIT, inode, integrity_check, plain_db, queued, read_text, stalled, wait_until


@pytest.fixture
def db_path(db_path: Path) -> Path:
    """conftest's path in a home that already exists, as for a daemon that ran before.

    A fresh home is tested on its own (``test_store_opens_on_a_home_that_does_not_exist_yet``),
    so that the tests here fail only for what they are about.
    """
    db_path.parent.mkdir(parents=True, exist_ok=True)
    return db_path


# --------------------------------------------------------------------------------------
# 1. Property: concurrent producers, multi-tool turns, scaffolding never stored
# --------------------------------------------------------------------------------------

any_text = st.text(max_size=24)
real_text = st.text(min_size=1, max_size=24).filter(lambda s: s.strip() != "")
tool_names = st.sampled_from(["web_search", "read_file", "terminal", "memory"])
scaffolding = st.one_of(
    st.builds(lambda c: {"role": "assistant", "content": c}, st.sampled_from([None, "", "  ", "\n\t"])),
    st.just({"role": "assistant", "content": None, "tool_calls": []}),
    st.just({"role": "assistant", "content": "", "tool_calls": None}),
)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """What one agent produces over a few turns, in production order."""
    msgs: list[dict[str, Any]] = []
    call_no = 0
    for _turn in range(draw(st.integers(1, 3))):
        msgs.append({"role": "user", "content": draw(any_text)})
        for _step in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 4))):
                call_no += 1
                calls.append(
                    {
                        "id": f"call_{call_no}",
                        "type": "function",
                        "function": {"name": draw(tool_names), "arguments": json.dumps({"q": draw(any_text)})},
                    }
                )
            content = draw(st.one_of(st.none(), st.just(""), real_text))
            msgs.append({"role": "assistant", "content": content, "tool_calls": calls})
            if draw(st.booleans()):
                msgs.append(draw(scaffolding))
            for call in calls:
                msgs.append(
                    {"role": "tool", "tool_call_id": call["id"], "name": call["function"]["name"],
                     "content": draw(any_text)}
                )
            if draw(st.booleans()):
                msgs.append(draw(scaffolding))
        if draw(st.booleans()):
            msgs.append({"role": "assistant", "content": None, "reasoning": draw(real_text)})
        msgs.append({"role": "assistant", "content": draw(real_text), "finish_reason": "stop"})
        # The trailing empty scaffolding that once made the final answer vanish.
        msgs.extend(draw(st.lists(scaffolding, max_size=2)))
    return msgs


def expect_scaffolding(msg: dict[str, Any]) -> bool:
    """Independent model: an assistant message with no text, tool calls or reasoning."""
    content = msg.get("content")
    return (
        msg["role"] == "assistant"
        and (content is None or content.strip() == "")
        and not msg.get("tool_calls")
        and not msg.get("reasoning")
    )


Acked = list[tuple[dict[str, Any], int | None]]


async def _produce_all(
    db: Path, n_sessions: int, producers: list[tuple[int, list[dict[str, Any]], random.Random]]
) -> tuple[list[Acked], dict[str, list[dict[str, Any]]]]:
    async with StateStore(db, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        sids = [f"s{i}" for i in range(n_sessions)]
        for sid in sids:
            await store.create_session(sid, "telegram")

        async def produce(sid: str, msgs: list[dict[str, Any]], rnd: random.Random) -> Acked:
            acked: Acked = []
            for msg in msgs:
                if rnd.random() < 0.5:
                    await asyncio.sleep(0)  # vary the interleaving between producers
                acked.append((msg, await store.persist_message(sid, msg)))
            return acked

        results = await asyncio.wait_for(
            asyncio.gather(*(produce(sids[s % n_sessions], msgs, rnd) for s, msgs, rnd in producers)), WAIT
        )
        replayed = {sid: await store.get_messages_as_conversation(sid) for sid in sids}
    return list(results), replayed


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_sessions=st.integers(1, 4),
    producers=st.lists(st.tuples(st.integers(0, 3), conversations(), st.randoms(use_true_random=False)),
                       min_size=1, max_size=10),
)
def test_every_acknowledged_message_is_stored_once_in_order(
    n_sessions: int, producers: list[tuple[int, list[dict[str, Any]], random.Random]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "state.db"
        results, replayed = asyncio.run(_produce_all(db, n_sessions, producers))

        acked_ids: list[int] = []
        expected_by_session: dict[str, list[tuple[int, dict[str, Any]]]] = {}
        for (s, _, _), acked in zip(producers, results, strict=True):
            sid = f"s{s % n_sessions}"
            ids = [rid for _, rid in acked if rid is not None]
            assert ids == sorted(ids) and len(set(ids)) == len(ids), "row ids must grow in production order"
            for msg, rid in acked:
                if expect_scaffolding(msg):
                    assert rid is None, f"scaffolding was stored: {msg!r}"
                else:
                    assert isinstance(rid, int), f"a real message was not acknowledged: {msg!r}"
                    expected_by_session.setdefault(sid, []).append((rid, msg))
            acked_ids += ids
        assert len(set(acked_ids)) == len(acked_ids), "two callers got the same row id"

        with plain_db(db) as conn:
            rows = {
                r[0]: r
                for r in conn.execute(
                    "SELECT id, session_id, role, content, tool_call_id, tool_calls, tool_name, reasoning FROM messages"
                )
            }
            counts = {
                r[0]: (r[1], r[2])
                for r in conn.execute("SELECT id, message_count, tool_call_count FROM sessions")
            }
        # Exactly the acknowledged rows: nothing lost, nothing doubled, nothing extra.
        assert sorted(rows) == sorted(acked_ids)
        for sid, expected in expected_by_session.items():
            for rid, msg in expected:
                _id, row_sid, role, content, tool_call_id, tool_calls, tool_name, reasoning = rows[rid]
                assert (row_sid, role, content, tool_call_id) == (
                    sid, msg["role"], msg.get("content"), msg.get("tool_call_id")
                )
                assert (json.loads(tool_calls) if tool_calls else None) == (msg.get("tool_calls") or None)
                assert tool_name == (msg.get("name") if msg["role"] == "tool" else None)
                assert reasoning == msg.get("reasoning")
        for _id, _sid, role, content, _tcid, tool_calls, _tn, reasoning in rows.values():
            assert not (role == "assistant" and not (content or "").strip() and not tool_calls and not reasoning)

        # Per session, in row-id order, the conversation replays what was produced.
        for sid in (f"s{i}" for i in range(n_sessions)):
            expected = [msg for _, msg in sorted(expected_by_session.get(sid, []), key=lambda p: p[0])]
            assert replayed[sid] == expected
            n_calls = sum(len(m.get("tool_calls") or []) for m in expected)
            assert counts[sid] == (len(expected), n_calls)


@pytest.mark.parametrize(
    "extra",
    [
        {"reasoning_details": [{"type": "reasoning.encrypted", "data": "opaque-blob"}]},
        {"codex_reasoning_items": [{"type": "reasoning", "encrypted_content": "opaque"}]},
        {"codex_message_items": [{"id": "msg_1", "phase": "final"}]},
    ],
    ids=["reasoning_details", "codex_reasoning_items", "codex_message_items"],
)
async def test_assistant_with_only_structured_reasoning_is_not_scaffolding(
    db_path: Path, extra: dict[str, Any]
) -> None:
    """An assistant message whose only payload is structured (e.g. encrypted) reasoning
    is something the model produced and the next request must replay: it is not an
    empty placeholder, so it must be stored like ``reasoning``/``reasoning_content`` are."""
    message = {"role": "assistant", "content": None, **extra}
    async with StateStore(db_path, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        await store.create_session("s", "telegram")
        rid = await store.persist_message("s", message)
        assert rid is not None, f"dropped as scaffolding: {message!r}"
        (row,) = await store.get_messages("s")
        key = next(iter(extra))
        assert (row["id"], row[key]) == (rid, extra[key])


# --------------------------------------------------------------------------------------
# 2. SIGKILL at random moments: every acknowledged append survives
# --------------------------------------------------------------------------------------

CRASH_ROUNDS = 6
Ack = tuple[str, tuple[int, str, str]]  # key, (row id, session id, sha256 of content)


async def _crash_round(db: Path, tag: str, delay: float, log_dir: Path, where: str, *, early: bool) -> list[Ack]:
    """Run one child and SIGKILL it: ``delay`` seconds after its first acknowledgement,
    or, when ``early``, ``delay`` seconds after it was started (maybe mid-open)."""
    acks: list[Ack] = []
    async with spawn(CRASH_CHILD, str(db), tag, log_dir=log_dir) as child:

        async def collect() -> None:
            while (line := await child.readline()) is not None:
                if line.startswith("ACK "):
                    _, rid, sid, key, digest = line.split(" ")
                    acks.append((key, (int(rid), sid, digest)))

        collector = asyncio.create_task(collect())
        if not early:
            await wait_until(lambda: len(acks) > 0 or collector.done(), f"a first acknowledged append {where}")
            assert acks, f"the child acknowledged nothing {where}:\n{child.stderr_text()}"
        await asyncio.sleep(delay)
        await child.kill()
        # Lines written before the kill are still in the pipe: they were acknowledged too.
        await asyncio.wait_for(collector, WAIT)
        assert child.proc.returncode == -9, f"the child died on its own {where}:\n{child.stderr_text()}"
    return acks


async def test_acknowledged_appends_survive_sigkill(db_path: Path, tmp_path: Path) -> None:
    db = db_path
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    acked: dict[str, tuple[int, str, str]] = {}
    # Round 0 is killed soon after start, possibly while it creates the database;
    # every later round is killed at a random moment of a steady append load.
    rounds = [(True, rng.uniform(0.1, 0.6))] + [(False, rng.uniform(0.0, 0.5)) for _ in range(CRASH_ROUNDS)]
    for round_no, (early, delay) in enumerate(rounds):
        where = f"(seed {seed}, round {round_no}, delay {delay:.3f}s)"
        new = await _crash_round(db, f"r{round_no}", delay, tmp_path / "logs", where, early=early)
        assert new or early, f"nothing was acknowledged {where}"
        acked.update(new)
        # Everything acknowledged so far, in every round, is there exactly once, unchanged.
        with plain_db(db) as conn:
            if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'messages'").fetchone():
                assert not acked and early, f"the schema vanished {where}"
                continue  # killed before the schema was committed: nothing to find yet
            found: dict[str, list[tuple[int, str, str]]] = {}
            for rid, sid, content in conn.execute("SELECT id, session_id, content FROM messages"):
                key = content.split(" ", 1)[0]
                found.setdefault(key, []).append((rid, sid, hashlib.sha256(content.encode()).hexdigest()))
        missing = [k for k in acked if k not in found]
        assert not missing, f"{len(missing)} acknowledged appends lost {where}: {missing[:5]}"
        for key, want in acked.items():
            assert found[key] == [want], f"{key} stored as {found[key]}, acknowledged as {want} {where}"
        assert integrity_check(db) == "ok", where

    # Our own open recovers the same file after the last crash and keeps writing.
    async with StateStore(db) as store:
        await store.create_session("after-crashes", "cli")
        rid = await store.append_message("after-crashes", "user", "still alive")
        assert [m["id"] for m in await store.get_messages("after-crashes")] == [rid]
    assert integrity_check(db) == "ok"


# --------------------------------------------------------------------------------------
# 3. Another process writes the same file (a CLI): waited for, never an error
# --------------------------------------------------------------------------------------


async def test_other_writer_process_is_waited_for_not_failed(db_path: Path, tmp_path: Path) -> None:
    rounds = 4
    acked: list[tuple[int, str]] = []
    async with StateStore(db_path) as store:
        w = store.writer
        await store.create_session("daemon", "telegram")
        stop = asyncio.Event()

        async def appender(n: int) -> None:
            i = 0
            while not stop.is_set():
                content = f"bg-{n}-{i}"
                acked.append((await store.append_message("daemon", "user", content), content))
                i += 1
                await asyncio.sleep(0.01)  # pacing only; leaves the peer room to take the lock

        background = [asyncio.create_task(appender(n)) for n in range(4)]
        probes: list[asyncio.Task[int]] = []
        try:
            async with spawn(SQLITE_PEER, "cli", str(db_path), str(rounds), log_dir=tmp_path / "logs") as peer:
                for i in range(rounds):
                    await peer.send("begin")
                    await peer.expect(f"HOLD {i}")
                    # The peer holds SQLite's write lock until we answer: contention is certain.
                    before = w.stats.busy_retries
                    probe = asyncio.create_task(store.append_message("daemon", "assistant", f"during-hold-{i}"))
                    probes.append(probe)
                    await wait_until(lambda before=before: w.stats.busy_retries > before,
                                     "the writer to meet the peer's lock")
                    assert not probe.done(), "a write committed while another process held the lock"
                    await peer.send("go")
                    await peer.expect(f"COMMITTED {i}")
                    acked.append((await asyncio.wait_for(probe, WAIT), f"during-hold-{i}"))
                await peer.expect("DONE")
                assert await peer.wait() == 0, peer.stderr_text()
        finally:
            stop.set()
            outcomes = await asyncio.wait_for(asyncio.gather(*background, *probes, return_exceptions=True), WAIT)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        assert not errors, f"an error reached a caller: {errors[0]!r}"
        assert w.stats.busy_retries >= rounds
        assert w.stats.busy_failures == 0

    with plain_db(db_path) as conn:
        stored = dict(conn.execute("SELECT id, content FROM messages WHERE session_id = 'daemon'").fetchall())
        cli_sessions = {r[0] for r in conn.execute("SELECT id FROM sessions WHERE source = 'cli'")}
    assert len(acked) == len({rid for rid, _ in acked})
    assert stored == dict(acked)
    assert cli_sessions == {f"cli-{i}" for i in range(rounds)}
    assert integrity_check(db_path) == "ok"


# --------------------------------------------------------------------------------------
# 4. The busy budget: a clear StorageBusyError, then recovery
# --------------------------------------------------------------------------------------


async def test_busy_budget_exhausted_then_recovers(db_path: Path, tmp_path: Path) -> None:
    async with StateStore(db_path, writer_settings=WriterSettings(busy_retry_budget=0.3)) as store:
        w = store.writer
        await store.create_session("s", "telegram")
        async with spawn(SQLITE_PEER, "hold", str(db_path), log_dir=tmp_path / "logs") as peer:
            await peer.expect("HOLD")  # the lock is held from here until we say so
            with pytest.raises(StorageBusyError) as excinfo:
                await asyncio.wait_for(store.append_message("s", "user", "while locked"), WAIT)
            message = str(excinfo.value)
            assert "state.db" in message and "locked by another process" in message, message
            assert w.stats.busy_failures >= 1
            assert w.running, "the writer must survive a busy failure"
            await peer.send("release")
            await peer.expect("RELEASED")
            assert await peer.wait() == 0, peer.stderr_text()
        rid = await store.append_message("s", "user", "after release")
        assert [(m["id"], m["content"]) for m in await store.get_messages("s")] == [(rid, "after release")]
        assert await store.get_session("held-by-peer") is not None  # the peer's write stands too
    assert integrity_check(db_path) == "ok"


# --------------------------------------------------------------------------------------
# 5. A second daemon on the same home is refused (sidecar flock)
# --------------------------------------------------------------------------------------

_LOCK_LINE = re.compile(r"^\d+:\s+(?:->\s+)?(\w+)\s+\S+\s+\S+\s+(\d+)\s+[0-9a-f]+:[0-9a-f]+:(\d+)\s")


def flock_holders() -> dict[int, set[int]]:
    """inode -> pids holding a BSD flock on it, from /proc/locks."""
    holders: dict[int, set[int]] = {}
    for line in Path("/proc/locks").read_text().splitlines():
        m = _LOCK_LINE.match(line)
        if m and m.group(1) == "FLOCK" and "->" not in line:
            holders.setdefault(int(m.group(3)), set()).add(int(m.group(2)))
    return holders


async def test_store_opens_on_a_home_that_does_not_exist_yet(tmp_path: Path) -> None:
    """A first start on a fresh HERMES_HOME must create the directory, lock and db."""
    db = tmp_path / "fresh-home" / "state.db"
    async with StateStore(db) as store:
        await store.create_session("first", "cli")
        assert await store.get_session("first") is not None
    assert db.exists() and lock_path_for(db).exists()


async def test_second_daemon_on_same_home_is_refused(db_path: Path, tmp_path: Path) -> None:
    lock = db_path.with_name("state.db.lock")
    assert lock_path_for(db_path) == lock
    async with spawn(STORE_HOLDER, str(db_path), log_dir=tmp_path / "logs") as holder:
        ready = await holder.expect("READY")
        assert int(ready.split()[1]) == holder.pid

        second = StateStore(db_path)
        with pytest.raises(StorageLockedError) as excinfo:
            await asyncio.wait_for(second.open(), WAIT)
        err = excinfo.value
        assert err.holder_pid == holder.pid
        assert str(holder.pid) in str(err), str(err)
        assert err.lock_path == str(lock)

        # The flock is on the sidecar, never on the database file.
        flocks = flock_holders()
        assert holder.pid in flocks.get(inode(lock), set())
        assert inode(db_path) not in flocks
        assert read_text(lock).strip() == str(holder.pid)

        holder.close_stdin()
        await holder.expect("CLOSED")
        assert await holder.wait() == 0, holder.stderr_text()

    # Free again once the holder is gone.
    async with StateStore(db_path) as store:
        await store.create_session("mine-now", "cli")
        assert read_text(lock).strip() == str(os.getpid())
        flocks = flock_holders()
        assert os.getpid() in flocks.get(inode(lock), set())
        assert inode(db_path) not in flocks
    assert os.getpid() not in flock_holders().get(inode(lock), set())


async def test_store_refused_once_opens_after_the_lock_is_freed(db_path: Path, tmp_path: Path) -> None:
    """A daemon that was refused (old one still stopping) retries ``open()`` on the same
    object once the lock is free: that must give a working store, not one without a
    writer whose every write waits forever."""
    store = StateStore(db_path)
    async with spawn(STORE_HOLDER, str(db_path), log_dir=tmp_path / "logs") as holder:
        await holder.expect("READY")
        with pytest.raises(StorageLockedError):
            await asyncio.wait_for(store.open(), WAIT)
        holder.close_stdin()
        await holder.expect("CLOSED")
        assert await holder.wait() == 0, holder.stderr_text()
    try:
        await asyncio.wait_for(store.open(), WAIT)
        assert store.writer.running, "open() returned but no writer runs: every write would hang"
        await asyncio.wait_for(store.create_session("retried", "cli"), WAIT)
        assert await store.get_session("retried") is not None
    finally:
        with contextlib.suppress(StorageError):
            await asyncio.wait_for(store.close(), WAIT)


# --------------------------------------------------------------------------------------
# 6. Full disk (page budget): only the op that does not fit fails
# --------------------------------------------------------------------------------------


async def test_full_disk_fails_only_the_op_that_does_not_fit(db_path: Path) -> None:
    huge = "overflowing " * 50_000  # ~600 KB, far beyond the page budget below
    async with StateStore(db_path) as store:
        w = store.writer
        await store.create_session("s", "telegram")
        early = [await store.append_message("s", "user", f"early-{i}") for i in range(5)]

        pages = await w.submit(lambda c: c.execute("PRAGMA page_count").fetchone()[0], transactional=False)
        budget = pages + 16
        got = await w.submit(lambda c: c.execute(f"PRAGMA max_page_count={budget}").fetchone()[0],
                             transactional=False)
        assert got == budget

        replays = w.stats.replays
        async with stalled(w) as stall:
            before = w.stats.submitted
            small = asyncio.create_task(store.append_message("s", "user", "small fits"))
            big = asyncio.create_task(store.append_message("s", "user", huge))
            await queued(w, before, 2)  # both in the same batch
            await stall.let_go()
            small_id = await asyncio.wait_for(small, WAIT)
            with pytest.raises(StorageFullError) as excinfo:
                await asyncio.wait_for(big, WAIT)
        assert "full" in str(excinfo.value)
        assert w.stats.replays == replays + 1, "the batch was not isolated and replayed"
        assert w.stats.full_failures >= 1
        assert w.stats.last_disk_fault is not None and "full" in w.stats.last_disk_fault[1]  # for /readyz
        assert w.running

        msgs = await store.get_messages("s")
        assert [(m["id"], m["content"]) for m in msgs] == [
            *((rid, f"early-{i}") for i, rid in enumerate(early)),
            (small_id, "small fits"),
        ]
        session = await store.get_session("s")
        assert session is not None and session["message_count"] == 6

        await w.submit(lambda c: c.execute("PRAGMA max_page_count=1073741823"), transactional=False)
        big_id = await store.append_message("s", "user", huge)
        assert (await store.get_messages("s"))[-1]["id"] == big_id
        assert await store.read(lambda c: c.execute("PRAGMA integrity_check").fetchone()[0]) == "ok"
    assert integrity_check(db_path) == "ok"
