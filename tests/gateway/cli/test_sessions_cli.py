"""``hermes-gateway sessions …`` as a user runs it: the real console script in a
subprocess, on a state.db seeded through StateStore."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage import StateStore, WriterSettings
from tests.gateway._console import ROOT, SCRIPT, TIMEOUT, Result, console_env
from tests.gateway.conftest import run_gateway

# Seeded sessions: ids chosen so that "20250305_0915" is an ambiguous prefix.
AUTH = "20250305_091523_a1b2c3d4"
WEATHER = "20250305_091523_a1b2ffff"
OLD_TG = "20240101_120000_0000aaaa"
OLD_ACTIVE = "20240102_120000_0000bbbb"
OLD_CLI = "20240103_120000_0000cccc"

DAY = 86400.0




def cli(home: Path, *args: str, stdin: int | None = subprocess.DEVNULL) -> Result:
    proc = subprocess.run([str(SCRIPT), "sessions", *args], env=console_env(home), stdin=stdin, capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=ROOT)
    return Result(proc.returncode, proc.stdout, proc.stderr)


async def acli(home: Path, *args: str) -> Result:
    """For tests whose event loop must keep serving (a daemon in this process) meanwhile."""
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT), "sessions", *args, env=console_env(home), cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


def cli_on_tty(home: Path, *args: str, answer: str | None = None) -> Result:
    """Run with stdin and stderr on a pseudo-terminal, as a person at a prompt would.

    ``err`` is what appeared on the terminal (prompts, errors, progress)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(SCRIPT), "sessions", *args], env=console_env(home), cwd=ROOT, stdin=slave,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + TIMEOUT
    answered = answer is None
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
            if not answered and b"[y/N]" in seen:
                os.write(master, answer.encode() + b"\n")  # type: ignore[union-attr]
                answered = True
        out, _ = proc.communicate(timeout=TIMEOUT)
        # Drain what the child wrote to the terminal after the loop stopped looking.
        while select.select([master], [], [], 0)[0]:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    tty_text = seen.decode(errors="replace")
    return Result(proc.returncode, out.decode(), tty_text)


async def _seed(db: Path) -> None:
    now = time.time()
    async with StateStore(db, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        await store.create_session(AUTH, "cli", started_at=now - 3 * 3600)
        await store.append_message(AUTH, "user", "Help me refactor the auth module please", timestamp=now - 2.5 * 3600)
        await store.append_message(AUTH, "assistant", "Sure — which part?", timestamp=now - 2 * 3600 - 60)
        await store.create_session(WEATHER, "telegram", started_at=now - 3 * DAY - 180)
        await store.append_message(WEATHER, "user", "What's the weather in Las Vegas?", timestamp=now - 3 * DAY - 120)
        await store.append_message(WEATHER, "assistant", "Sunny, 31°C.", timestamp=now - 3 * DAY - 60)
        # Old sessions for prune: two ended, one still active.
        for sid, source, age in ((OLD_TG, "telegram", 200), (OLD_ACTIVE, "telegram", 199), (OLD_CLI, "cli", 198)):
            await store.create_session(sid, source, started_at=now - age * DAY)
            await store.append_message(sid, "user", f"old question {sid}", timestamp=now - age * DAY)
        await store.end_session(OLD_TG, "session_reset")
        await store.end_session(OLD_CLI, "user_exit")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "hermes"
    asyncio.run(_seed(h / "state.db"))
    return h


def _db(home: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


def _ids(home: Path) -> set[str]:
    with _db(home) as conn:
        return {r[0] for r in conn.execute("SELECT id FROM sessions")}


def _title(home: Path, sid: str) -> str | None:
    with _db(home) as conn:
        row = conn.execute("SELECT title FROM sessions WHERE id = ?", (sid,)).fetchone()
        return None if row is None else row[0]


def _one_line_error(r: Result) -> str:
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1, r.err
    assert lines[0].startswith("hermes-gateway sessions: "), r.err
    return lines[0]


def _columns(line: str) -> list[str]:
    return [c for c in line.split("  ") if c.strip()]


# ---------------------------------------------------------------------- list


def test_list_without_titles_uses_the_preview_source_layout(home: Path) -> None:
    r = cli(home, "list")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["Preview", "Last", "Active", "Src", "ID"]
    assert set(lines[1]) == {"─"}
    # Newest first; relative times; full ids (usable as they are).
    assert lines[2].startswith("Help me refactor the auth module please")
    assert [c.strip() for c in _columns(lines[2])][1:] == ["2h ago", "cli", AUTH]
    assert [c.strip() for c in _columns(lines[3])][1:] == ["3d ago", "telegram", WEATHER]
    assert len(lines) == 2 + 5
    # Sessions older than a week show their date.
    assert any(_columns(line)[1].strip().startswith("2") and "-" in _columns(line)[1] for line in lines[4:])


def test_list_with_titles_uses_the_title_layout(home: Path) -> None:
    assert cli(home, "rename", AUTH, "refactoring", "auth").code == 0
    r = cli(home, "list")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].split() == ["Title", "Preview", "Last", "Active", "ID"]
    assert [c.strip() for c in _columns(lines[2])] == [
        "refactoring auth", "Help me refactor the auth module please", "2h ago", AUTH]
    # An untitled session in the titled layout shows a dash.
    assert [c.strip() for c in _columns(lines[3])] == [
        "—", "What's the weather in Las Vegas?", "3d ago", WEATHER]
    assert "Src" not in lines[0]


def test_list_filters_by_source_and_limits(home: Path) -> None:
    r = cli(home, "list", "--source", "telegram", "--limit", "1")
    assert r.code == 0, r.err
    rows = r.out.splitlines()[2:]
    assert len(rows) == 1 and rows[0].endswith(WEATHER)
    assert cli(home, "list", "--source", "slack").out.strip() == "No sessions found from slack."


def test_list_on_an_empty_home_creates_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli(empty, "list")
    assert (r.code, r.out.strip()) == (0, "No sessions found.")
    assert not (empty / "state.db").exists()


_HOLD_LOCKS = """
import asyncio, sqlite3, sys
from pathlib import Path
from storage import StateStore

async def main():
    db = Path(sys.argv[1])
    async with StateStore(db):  # the single-writer lock (state.db.lock), as a running daemon holds it
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")  # and SQLite's write lock, mid-transaction
        print("holding", flush=True)
        sys.stdin.readline()
        conn.execute("ROLLBACK")
        conn.close()

asyncio.run(main())
"""

_CRASH_WITH_A_WAL = """
import asyncio, os, sys
from pathlib import Path
from storage import StateStore, WriterSettings

async def main():
    store = StateStore(Path(sys.argv[1]), writer_settings=WriterSettings(synchronous="FULL"))
    await store.open()
    await store.append_message(sys.argv[2], "user", "written just before the crash")
    os._exit(0)  # like kill -9: no close, no checkpoint; the write is only in state.db-wal

asyncio.run(main())
"""


async def test_reads_work_while_another_process_holds_both_write_locks(home: Path) -> None:
    """Reads take neither the writer lock nor SQLite's write lock: they run beside a busy daemon."""
    holder = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _HOLD_LOCKS, str(home / "state.db"), cwd=ROOT, env={**console_env(home), "PYTHONPATH": str(ROOT)},
        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert holder.stdin is not None and holder.stdout is not None
    try:

        async def holding() -> None:  # the store logs to stdout first
            while (line := await holder.stdout.readline()) != b"holding\n":
                assert line, "the lock holder exited early"

        await asyncio.wait_for(holding(), TIMEOUT)
        r = await acli(home, "list")
        assert r.code == 0, r.err
        assert AUTH in r.out
        s = await acli(home, "stats")
        assert s.code == 0 and "Total sessions: 5" in s.out
    finally:
        holder.stdin.write(b"\n")
        await holder.stdin.drain()
        assert await asyncio.wait_for(holder.wait(), TIMEOUT) == 0


def test_reads_after_a_crash_leave_the_database_and_its_wal_untouched(home: Path, tmp_path: Path) -> None:
    """A read-write connection, last to close, would checkpoint the WAL into state.db and delete it:
    the read commands must not (they never write, not even that)."""
    db = home / "state.db"
    wal = db.with_name("state.db-wal")
    crashed = subprocess.run([sys.executable, "-c", _CRASH_WITH_A_WAL, str(db), OLD_CLI], cwd=ROOT,
                             env={**console_env(home), "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                             timeout=TIMEOUT)
    assert crashed.returncode == 0, crashed.stderr
    assert wal.exists() and wal.stat().st_size > 0
    before = (db.read_bytes(), wal.read_bytes())

    listed = cli(home, "list")
    assert listed.code == 0 and OLD_CLI in listed.out, listed.err
    assert cli(home, "stats").out.startswith("Total sessions: 5\nTotal messages: 8\n")
    exported = cli(home, "export", str(tmp_path / "all.jsonl"), "--session-id", OLD_CLI)
    assert exported.code == 0, exported.err
    # The write that lives only in the WAL is read...
    [session] = [json.loads(line) for line in (tmp_path / "all.jsonl").read_text().splitlines()]
    assert session["messages"][-1]["content"] == "written just before the crash"
    # ...and nothing was written back.
    assert wal.exists() and (db.read_bytes(), wal.read_bytes()) == before


# -------------------------------------------------------------------- export


def test_export_writes_one_session_per_line_with_all_messages(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "backup.jsonl"
    r = cli(home, "export", str(out))
    assert r.code == 0, r.err
    assert "Exported 5 sessions" in r.out
    sessions = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {s["id"] for s in sessions} == _ids(home)
    weather = next(s for s in sessions if s["id"] == WEATHER)
    assert weather["source"] == "telegram"
    assert [(m["role"], m["content"]) for m in weather["messages"]] == [
        ("user", "What's the weather in Las Vegas?"), ("assistant", "Sunny, 31°C.")]
    # Conversations are private: the export is readable by its owner only.
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    # Not a terminal: no progress bar drawn anywhere.
    assert "exporting" not in r.err and "━" not in r.err


def test_export_by_source_and_by_session_prefix(home: Path, tmp_path: Path) -> None:
    tg = tmp_path / "tg.jsonl"
    assert cli(home, "export", str(tg), "--source", "telegram").code == 0
    assert {json.loads(line)["id"] for line in tg.read_text().splitlines()} == {WEATHER, OLD_TG, OLD_ACTIVE}
    one = tmp_path / "one.jsonl"
    r = cli(home, "export", str(one), "--session-id", AUTH[:21])
    assert r.code == 0, r.err
    [only] = [json.loads(line) for line in one.read_text().splitlines()]
    assert only["id"] == AUTH and len(only["messages"]) == 2


def test_export_to_stdout(home: Path) -> None:
    r = cli(home, "export", "-", "--session-id", WEATHER)
    assert r.code == 0, r.err
    [only] = [json.loads(line) for line in r.out.splitlines()]
    assert only["id"] == WEATHER
    assert "Exported 1 session to stdout." in r.err


def test_export_with_an_ambiguous_prefix_lists_the_candidates(home: Path, tmp_path: Path) -> None:
    target = tmp_path / "x.jsonl"
    r = cli(home, "export", str(target), "--session-id", "20250305_0915")
    assert r.code == 1
    line = _one_line_error(r)
    assert AUTH in line and WEATHER in line and "matches 2 sessions" in line
    assert not target.exists()


def test_export_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    h = tmp_path / "many"

    async def seed() -> None:
        async with StateStore(h / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as store:
            for i in range(60):
                sid = f"20250101_000000_{i:08x}"
                await store.create_session(sid, "cli")
                await store.append_message(sid, "user", f"hello {i}")

    asyncio.run(seed())
    out = tmp_path / "many.jsonl"
    r = cli_on_tty(h, "export", str(out))
    assert r.code == 0, r.err
    assert "exporting" in r.err  # rich drew its bar on the terminal
    assert len(out.read_text().splitlines()) == 60


# -------------------------------------------------------------------- rename


def test_rename_takes_a_multi_word_title_without_quotes(home: Path) -> None:
    r = cli(home, "rename", AUTH[:21], "debugging", "auth", "flow")
    assert r.code == 0, r.err
    assert _title(home, AUTH) == "debugging auth flow"
    assert "debugging auth flow" in r.out and AUTH in r.out


def test_rename_conflict_names_the_other_session(home: Path) -> None:
    assert cli(home, "rename", AUTH, "my project").code == 0
    r = cli(home, "rename", WEATHER, "my", "project")
    assert r.code == 1
    line = _one_line_error(r)
    assert "'my project' is already used by session " + AUTH in line
    assert _title(home, WEATHER) is None


def test_rename_of_unknown_or_ambiguous_ids(home: Path) -> None:
    missing = cli(home, "rename", "nope", "x")
    assert missing.code == 1 and "No session id starts with 'nope'" in _one_line_error(missing)
    ambiguous = cli(home, "rename", "20250305", "x")
    assert ambiguous.code == 1 and "matches 2 sessions" in _one_line_error(ambiguous)
    assert _title(home, AUTH) is None and _title(home, WEATHER) is None


def test_rename_with_an_empty_title_is_refused(home: Path) -> None:
    r = cli(home, "rename", AUTH, "\u200b")
    assert r.code == 1 and "cannot be empty" in _one_line_error(r)


async def test_writes_refuse_clearly_when_the_lock_is_held_without_a_socket(home: Path) -> None:
    async with StateStore(home / "state.db"):  # holds the writer lock; no control socket exists
        r = await acli(home, "rename", AUTH, "x")
    assert r.code == 1
    line = _one_line_error(r)
    assert f"process {os.getpid()}" in line and "gateway.sock" in line and "no daemon answers" in line
    assert _title(home, AUTH) is None


# -------------------------------------------------------------------- delete


def test_delete_with_yes(home: Path) -> None:
    r = cli(home, "delete", WEATHER[:21], "--yes")
    assert r.code == 0, r.err
    assert f"Deleted session {WEATHER}." in r.out
    assert WEATHER not in _ids(home)
    with _db(home) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (WEATHER,)).fetchone()[0] == 0


def test_delete_without_yes_and_without_a_terminal_refuses(home: Path) -> None:
    r = cli(home, "delete", WEATHER)
    assert r.code == 1
    assert "--yes" in _one_line_error(r)
    assert WEATHER in _ids(home)


def test_delete_asks_on_a_terminal(home: Path) -> None:
    declined = cli_on_tty(home, "delete", WEATHER, answer="n")
    assert declined.code == 1, declined.err
    assert "Delete session " + WEATHER in declined.err and "2 messages" in declined.err
    assert "cancelled" in declined.err
    assert WEATHER in _ids(home)
    accepted = cli_on_tty(home, "delete", WEATHER, answer="y")
    assert accepted.code == 0, accepted.err
    assert WEATHER not in _ids(home)


def test_delete_of_an_unknown_session(home: Path) -> None:
    r = cli(home, "delete", "20990101", "--yes")
    assert r.code == 1 and "No session id starts with '20990101'" in _one_line_error(r)


# --------------------------------------------------------------------- prune


def test_prune_deletes_only_old_ended_sessions(home: Path) -> None:
    r = cli(home, "prune", "--older-than", "100", "--yes")
    assert r.code == 0, r.err
    assert "Pruned 2 sessions." in r.out
    assert _ids(home) == {AUTH, WEATHER, OLD_ACTIVE}  # the old active one is never pruned


def test_prune_by_source(home: Path) -> None:
    r = cli(home, "prune", "--older-than", "100", "--source", "cli", "--yes")
    assert r.code == 0, r.err
    assert _ids(home) == {AUTH, WEATHER, OLD_TG, OLD_ACTIVE}


def test_prune_without_yes_refuses_and_says_how_many(home: Path) -> None:
    refused = cli(home, "prune")
    assert refused.code == 1 and "--yes" in _one_line_error(refused)
    assert len(_ids(home)) == 5
    asked = cli_on_tty(home, "prune", answer="n")
    assert "Delete 2 ended sessions older than 90 days?" in asked.err
    assert len(_ids(home)) == 5
    nothing = cli(home, "prune", "--older-than", "365")
    assert (nothing.code, nothing.out.strip()) == (0, "No ended sessions older than 365 days; nothing to prune.")


ROOT_X = "20240110_120000_0000dd01"
MIDDLE_X = "20240301_120000_0000dd02"
LIVE_X = "20250305_120000_0000dd03"


async def _seed_lineage(db: Path) -> None:
    """A compressed conversation: X (old, compressed) -> X #2 (old, compressed) -> X #3 (live)."""
    now = time.time()
    async with StateStore(db, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        parent = None
        for sid, title, age in ((ROOT_X, "Fix Docker Build", 300), (MIDDLE_X, "Fix Docker Build #2", 250),
                                (LIVE_X, "Fix Docker Build #3", 1)):
            await store.create_session(sid, "telegram", parent_session_id=parent, started_at=now - age * DAY)
            await store.append_message(sid, "user", f"docker again {sid}", timestamp=now - age * DAY)
            await store.set_session_title(sid, title)
            if sid != LIVE_X:
                await store.end_session(sid, "compression")
            parent = sid


def test_prune_keeps_a_lineage_in_use_and_says_what_it_kept(home: Path) -> None:
    asyncio.run(_seed_lineage(home / "state.db"))
    asked = cli_on_tty(home, "prune", "--older-than", "100", answer="n")
    assert "Delete 2 ended sessions older than 100 days (2 more kept: later sessions continue from them)?" in (
        asked.err)
    r = cli(home, "prune", "--older-than", "100", "--yes")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == "Pruned 2 sessions."
    assert lines[1].startswith("Kept 2 old ended sessions, because sessions that are kept continue from them")
    assert "/resume <title>" in lines[1]
    assert lines[2:] == [f"  {ROOT_X} 'Fix Docker Build', continued by {LIVE_X}",
                         f"  {MIDDLE_X} 'Fix Docker Build #2', continued by {LIVE_X}"]
    assert _ids(home) == {AUTH, WEATHER, OLD_ACTIVE, ROOT_X, MIDDLE_X, LIVE_X}
    with _db(home) as conn:
        parents = dict(conn.execute("SELECT id, parent_session_id FROM sessions WHERE title LIKE 'Fix Docker%'"))
    assert parents == {ROOT_X: None, MIDDLE_X: ROOT_X, LIVE_X: MIDDLE_X}
    again = cli(home, "prune", "--older-than", "100", "--yes")
    assert again.out.splitlines()[0] == "No ended sessions older than 100 days can go; nothing to prune."
    assert again.out.splitlines()[1].startswith("Kept 2 old ended sessions")


def test_prune_rejects_a_negative_age(home: Path) -> None:
    r = cli(home, "prune", "--older-than", "-1", "--yes")
    assert r.code == 1 and "--older-than" in _one_line_error(r)
    assert len(_ids(home)) == 5


# --------------------------------------------------------------------- stats


def test_stats(home: Path) -> None:
    r = cli(home, "stats")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[:5] == ["Total sessions: 5", "Total messages: 7", "telegram: 3 sessions", "cli: 2 sessions",
                         lines[4]]
    assert lines[4].startswith("Database size: ") and lines[4].endswith(("KB", "MB"))


# -------------------------------------------------------------------- config


def test_with_a_broken_config_reads_warn_and_work_and_writes_exit_78(home: Path) -> None:
    """Reads need nothing from config.yaml: a user fixing it can still look at the sessions."""
    (home / "config.yaml").write_text("gateway:\n  drain_timeout: soon\nno_such_section: {}\n")
    for args in (["list"], ["stats"], ["export", "-"]):
        r = cli(home, *args)
        assert r.code == 0, r.err
        warning = r.err.splitlines()[0]
        assert warning.startswith("hermes-gateway sessions: warning: configuration error (reading anyway): ")
        assert "gateway.drain_timeout" in warning and "no_such_section" in warning
    assert AUTH in cli(home, "list").out
    assert len(cli(home, "export", "-").out.splitlines()) == 5
    for args in (["rename", AUTH, "new", "title"], ["delete", AUTH, "--yes"], ["prune", "--yes"]):
        r = cli(home, *args)
        assert r.code == 78, (args, r.err)
        assert "configuration error" in _one_line_error(r) and "no_such_section" in r.err
    assert _title(home, AUTH) is None and AUTH in _ids(home) and OLD_TG in _ids(home)


# ----------------------------------------------------- through the daemon


async def test_writes_go_through_the_running_daemon(home: Path) -> None:
    async with run_gateway(home, None) as running:
        # A daemon without its control socket would leave the CLI no way to write: that is a failure.
        assert (home / "gateway.sock").exists(), "the daemon did not create its control socket"
        renamed = await acli(home, "rename", AUTH[:21], "via", "the", "daemon")
        assert renamed.code == 0, renamed.err
        # The daemon holds the writer lock, so a direct write would have been
        # refused: success means the daemon made the change, through its store.
        assert running.gateway.services is not None
        session = await running.gateway.services.store.get_session(AUTH)
        assert session is not None and session["title"] == "via the daemon"
        conflict = await acli(home, "rename", WEATHER, "via the daemon")
        assert conflict.code == 1 and AUTH in _one_line_error(conflict)
        deleted = await acli(home, "delete", WEATHER, "--yes")
        assert deleted.code == 0, deleted.err
        pruned = await acli(home, "prune", "--older-than", "100", "--yes")
        assert pruned.code == 0 and "Pruned 2 sessions." in pruned.out
        assert _ids(home) == {AUTH, OLD_ACTIVE}
        listed = await acli(home, "list")
        assert listed.code == 0 and "via the daemon" in listed.out


# ------------------------------------------------------------- edges, units


def test_export_into_a_missing_folder_is_one_clear_line(home: Path, tmp_path: Path) -> None:
    r = cli(home, "export", str(tmp_path / "nope" / "x.jsonl"))
    assert r.code == 1 and "does not exist" in _one_line_error(r)


def test_export_to_a_reader_that_goes_away_stops_quietly(home: Path) -> None:
    """``export - | head -c 10``: no traceback, no 'Broken pipe' noise."""

    async def grow() -> None:  # far more than a pipe buffer, so the writer meets the closed pipe
        async with StateStore(home / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as store:
            for i in range(8):
                await store.append_message(OLD_CLI, "user", "x" * 256_000 + str(i))

    asyncio.run(grow())
    proc = subprocess.Popen([str(SCRIPT), "sessions", "export", "-"], env=console_env(home), cwd=ROOT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=TIMEOUT) == 1  # the export did not complete
    assert "Traceback" not in err and "Broken pipe" not in err


def test_relative_times_and_sizes() -> None:
    from gateway.cli.sessions_table import format_size, relative_time

    now = 1_800_000_000.0
    assert [relative_time(now - d, now) for d in (5, 300, 2 * 3600 + 1, 30 * 3600, 3 * DAY + 1)] == [
        "just now", "5m ago", "2h ago", "yesterday", "3d ago"]
    assert relative_time(now - 30 * DAY, now)[:4].isdigit()
    assert relative_time(None, now) == "—"
    assert [format_size(n) for n in (512, 2048, 12_400_000)] == ["512 B", "2.0 KB", "11.8 MB"]


async def test_admin_functions_in_process(home: Path) -> None:
    """What the daemon's control server calls: plain JSON-able dicts back, our errors raised."""
    from gateway.cli import sessions_admin
    from gateway.errors import InvalidPruneAgeError
    from storage import AmbiguousSessionError, SessionNotFoundError, TitleConflictError

    async with StateStore(home / "state.db") as store:
        renamed = await sessions_admin.rename(store, AUTH[:21], "  spaced\ttitle ")
        assert renamed == {"session_id": AUTH, "title": "spaced title", "previous_title": None}
        with pytest.raises(TitleConflictError):
            await sessions_admin.rename(store, WEATHER, "spaced title")
        with pytest.raises(AmbiguousSessionError) as amb:
            await sessions_admin.delete(store, "20250305")
        assert set(amb.value.candidates) == {AUTH, WEATHER}
        deleted = await sessions_admin.delete(store, WEATHER)
        assert deleted == {"session_id": WEATHER, "deleted": True, "title": None, "message_count": 2}
        with pytest.raises(SessionNotFoundError):
            await sessions_admin.delete(store, WEATHER)
        pruned = await sessions_admin.prune(store, 100, None)
        assert pruned == {"deleted": 2, "older_than_days": 100.0, "source": None, "skipped": []}
        json.dumps([renamed, deleted, pruned])
        with pytest.raises(InvalidPruneAgeError):
            await sessions_admin.prune(store, float("nan"), None)
