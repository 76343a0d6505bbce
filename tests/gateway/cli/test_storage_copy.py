"""``hermes-gateway storage copy`` as an operator runs it (the console script, real files, a real
PostgreSQL server): a copy there and back, a ``kill -9`` mid-batch and the resume, refusals, and a
bad URL, none showing a password or a traceback."""

from __future__ import annotations

import asyncio
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from storage import StateStore
from tests.gateway._console import ROOT, SCRIPT, TIMEOUT, Result, console_env
from tests.pg.server import PgServer
from tests.storage._copy_fixture import make_state_db, pg_rows, sqlite_rows

WAIT = 30.0


def storage(home: Path, *args: str) -> Result:
    proc = subprocess.run([str(SCRIPT), "storage", *args], env=console_env(home), cwd=ROOT,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _clean(r: Result, password: str) -> None:
    assert "Traceback" not in r.err + r.out
    assert password not in r.err + r.out


async def test_copy_there_and_back_prints_progress_and_the_counts(pg_url: str, pg_server: PgServer,
                                                                  tmp_path: Path) -> None:
    db, back = tmp_path / "one" / "state.db", tmp_path / "two" / "state.db"
    await make_state_db(db, extra_sessions=4, messages_each=3)
    there = await asyncio.to_thread(storage, tmp_path, "copy", "--from", f"sqlite://{db}", "--to", pg_url,
                                    "--batch-size", "8")
    _clean(there, pg_server.password)
    assert there.code == 0, there.err
    lines = there.out.splitlines()
    assert lines[0] == f"copying sqlite://{db} -> {pg_url.replace(pg_server.password, '***')}"
    assert "messages: 8/" in there.out and "gateway_pairing_codes: 1/1 rows" in there.out  # plain lines in a pipe
    messages = len(sqlite_rows(db)["messages"])
    assert any(line.split() == ["messages", str(messages), str(messages)] for line in lines)
    assert lines[-1].startswith("done: ") and "same number of rows" in lines[-1]

    home = await asyncio.to_thread(storage, tmp_path, "copy", "--from", pg_url, "--to", f"sqlite://{back}")
    _clean(home, pg_server.password)
    assert home.code == 0, home.err
    assert sqlite_rows(back) == sqlite_rows(db)


def _waiting_copies(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                           " AND wait_event_type = 'Lock'", ("hermes-gateway storage copy",)).fetchone()
        return int(row[0]) if row else 0


def _progress(url: str) -> dict[str, tuple[int, bool]]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT table_name, rows_copied, done FROM hermes_copy_progress").fetchall()
        return {str(r[0]): (int(r[1]), bool(r[2])) for r in rows}


async def test_a_copy_killed_mid_batch_resumes_with_no_row_missing_or_doubled(
        pg_url: str, pg_server: PgServer, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    await make_state_db(db, extra_sessions=30, messages_each=4)
    source = sqlite_rows(db)
    # An uncommitted row with the key of a session in the middle of the copy order: the child's
    # batch that holds that key waits on it, inside its transaction, with earlier batches committed.
    blocker: psycopg.Connection[Any] = await asyncio.to_thread(lambda: psycopg.connect(pg_url))
    try:
        blocker.execute("INSERT INTO sessions (id, source, started_at) VALUES ('bulk-0017', 'x', 0)")
        proc = await asyncio.create_subprocess_exec(
            str(SCRIPT), "storage", "copy", "--from", f"sqlite://{db}", "--to", pg_url, "--batch-size", "5",
            env=console_env(tmp_path), cwd=str(ROOT), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = asyncio.get_running_loop().time() + WAIT
            while await asyncio.to_thread(_waiting_copies, pg_url) == 0:
                assert proc.returncode is None, (await proc.communicate())[1].decode()
                assert asyncio.get_running_loop().time() < deadline, "the copy never reached the held key"
                await asyncio.sleep(0.05)
            before_kill = await asyncio.to_thread(_progress, pg_url)
            proc.kill()  # SIGKILL, mid-transaction
            await asyncio.wait_for(proc.wait(), WAIT)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    finally:
        await asyncio.to_thread(blocker.rollback)
        await asyncio.to_thread(blocker.close)
    assert proc.returncode == -9
    copied, done = before_kill["sessions"]
    assert 0 < copied < len(source["sessions"]) and not done and "messages" not in before_kill
    after_kill = pg_rows(pg_url, ["sessions", "messages"])
    assert len(after_kill["sessions"]) == copied and after_kill["messages"] == []  # the batch in flight is gone

    again = await asyncio.to_thread(storage, tmp_path, "copy", "--from", f"sqlite://{db}", "--to", pg_url,
                                    "--batch-size", "5")
    _clean(again, pg_server.password)
    assert again.code == 0, again.err
    assert f"note: resuming the copy from sqlite://{db}: {copied} rows already there" in again.out
    assert pg_rows(pg_url, list(source)) == source  # every row once: the same rows, no duplicates


async def test_refusals_are_one_clear_line(pg_url: str, pg_server: PgServer, tmp_path: Path) -> None:
    one, two = tmp_path / "one" / "state.db", tmp_path / "two" / "state.db"
    await make_state_db(one)
    await make_state_db(two)
    first = await asyncio.to_thread(storage, tmp_path, "copy", "--from", f"sqlite://{one}", "--to", pg_url)
    assert first.code == 0, first.err
    other = await asyncio.to_thread(storage, tmp_path, "copy", "--from", f"sqlite://{two}", "--to", pg_url)
    _clean(other, pg_server.password)
    assert other.code == 1 and "is not empty" in other.err and "--force" in other.err
    assert len(other.err.strip().splitlines()) == 1

    async with StateStore(two):  # a daemon running on the source
        held = await asyncio.to_thread(storage, tmp_path, "copy", "--from", f"sqlite://{two}",
                                       "--to", f"sqlite://{tmp_path / 'three.db'}")
    assert held.code == 1 and "in use by process" in held.err and "stop it" in held.err
    _clean(held, pg_server.password)


async def test_a_bad_url_exits_with_a_clear_error_and_no_password(pg_server: PgServer, tmp_path: Path) -> None:
    secret = "s3cret-Pa55word"
    db = tmp_path / "state.db"
    cases = {
        ("--from", f"mysql://me:{secret}@localhost/db"): (2, "unknown backend 'mysql'"),
        ("--from", f"postgresql://me:{secret}@localhost:notaport/db"): (2, "malformed"),
        ("--from", "sqlite://relative/state.db"): (2, "absolute"),
        ("--from", f"sqlite://{db}"): (1, "no state.db at"),
    }
    for (flag, url), (code, words) in cases.items():
        r = await asyncio.to_thread(storage, tmp_path, "copy", flag, url, "--to", f"sqlite://{tmp_path / 'x.db'}")
        assert r.code == code and words in r.err, (url, r)
        _clean(r, secret)
    wrong = pg_server.url().replace(pg_server.password, secret)
    r = await asyncio.to_thread(storage, tmp_path, "copy", "--from", wrong, "--to", f"sqlite://{tmp_path / 'y.db'}")
    assert r.code == 1 and "password authentication failed" in r.err, r
    _clean(r, secret)
    assert f"{sys.executable}" not in r.err


async def test_a_copy_into_state_db_killed_part_way_resumes_and_search_finds_every_message(
        pg_url: str, pg_server: PgServer, tmp_path: Path) -> None:
    db, back = tmp_path / "one" / "state.db", tmp_path / "two" / "state.db"
    await make_state_db(db, extra_sessions=20, messages_each=4)
    source = sqlite_rows(db)
    first = await asyncio.to_thread(storage, tmp_path, "copy", "--from", f"sqlite://{db}", "--to", pg_url)
    assert first.code == 0, first.err
    # A table the copy reaches after sessions, messages and most gateway tables, held by another
    # transaction: the copy waits there, with everything before it committed into state.db.
    holder: psycopg.Connection[Any] = await asyncio.to_thread(lambda: psycopg.connect(pg_url))
    try:
        holder.execute("LOCK TABLE gateway_outbound IN ACCESS EXCLUSIVE MODE")
        proc = await asyncio.create_subprocess_exec(
            str(SCRIPT), "storage", "copy", "--from", pg_url, "--to", f"sqlite://{back}", "--batch-size", "5",
            env=console_env(tmp_path), cwd=str(ROOT), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = asyncio.get_running_loop().time() + WAIT
            while await asyncio.to_thread(_waiting_copies, pg_url) == 0:
                assert proc.returncode is None, (await proc.communicate())[1].decode()
                assert asyncio.get_running_loop().time() < deadline, "the copy never reached the held table"
                await asyncio.sleep(0.05)
            proc.kill()
            await asyncio.wait_for(proc.wait(), WAIT)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    finally:
        await asyncio.to_thread(holder.rollback)
        await asyncio.to_thread(holder.close)
    assert proc.returncode == -9
    part = sqlite_rows(back)
    assert part["messages"] == source["messages"] and part["gateway_outbound"] == []

    again = await asyncio.to_thread(storage, tmp_path, "copy", "--from", pg_url, "--to", f"sqlite://{back}",
                                    "--batch-size", "5")
    _clean(again, pg_server.password)
    assert again.code == 0, again.err
    assert "note: resuming the copy" in again.out
    assert sqlite_rows(back) == source
    async with StateStore(back) as store:
        assert await store.read(lambda c: int(c.execute(
            "SELECT count(*) FROM messages WHERE id > (SELECT CAST(value AS INTEGER) FROM state_meta"
            " WHERE key = 'fts_indexed_through')").fetchone()[0])) == 0
        hits = await store.read(lambda c: int(c.execute(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'bulk'").fetchone()[0]))
        assert hits == sum(1 for m in source["messages"] if str(m["content"]).startswith("bulk "))


async def test_a_table_the_target_lacks_is_shown_and_the_exit_code_says_the_counts_differ(
        pg_url: str, pg_server: PgServer, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    await make_state_db(db)
    with sqlite3.connect(db) as conn:  # a table some other tool added to state.db
        conn.execute("CREATE TABLE notes_of_another_tool (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes_of_another_tool (body) VALUES ('kept only there')")
    conn.close()
    r = await asyncio.to_thread(storage, tmp_path, "copy", "--from", f"sqlite://{db}", "--to", pg_url)
    _clean(r, pg_server.password)
    assert r.code == 3, r
    assert any(line.split()[:3] == ["notes_of_another_tool", "1", "0"] and "NOT COPIED" in line
               for line in r.out.splitlines()), r.out
    assert "row counts differ" in r.err
    # everything else arrived whole
    assert pg_rows(pg_url, ["messages"]) == {"messages": sqlite_rows(db)["messages"]}


def _on_a_terminal(home: Path, *args: str) -> tuple[int, str]:
    """The command with its stdout on a pseudo-terminal (as a person at a shell sees it), not under CI."""
    master, slave = pty.openpty()
    env = console_env(home)
    env.pop("CI", None)
    try:
        proc = subprocess.Popen([str(SCRIPT), "storage", *args], env=env, cwd=ROOT, stdin=subprocess.DEVNULL,
                                stdout=slave, stderr=subprocess.PIPE)
        os.close(slave)
        chunks: list[bytes] = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        proc.wait(TIMEOUT)
        assert proc.stderr is not None
        proc.stderr.close()
        return proc.returncode, b"".join(chunks).decode(errors="replace")
    finally:
        os.close(master)


async def test_on_a_terminal_a_progress_bar_is_drawn(tmp_path: Path) -> None:
    db = tmp_path / "one" / "state.db"
    await make_state_db(db, extra_sessions=3, messages_each=3)
    code, out = await asyncio.to_thread(_on_a_terminal, tmp_path, "copy", "--from", f"sqlite://{db}",
                                        "--to", f"sqlite://{tmp_path / 'two' / 'state.db'}", "--batch-size", "4")
    assert code == 0, out
    assert "━" in out and "messages: 4/" not in out  # a bar, not the plain lines of a pipe
    assert "done: " in out
