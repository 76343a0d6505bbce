"""``hermes-gateway chat`` as a real subprocess with piped stdin, against the
daemon running in this test's event loop (or in-process with --standalone)."""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapters.cli import CliAdapter
from storage import StateStore, WriterSettings
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway, write_config
from tests.gateway.control.test_control import until

TERMINAL_ID = re.compile(r"^\d{8}_\d{6}_[0-9a-f]{6}$")
ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1"}


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@dataclass
class Done:
    code: int
    out: str
    err: str


_CHECKOUT = str(Path(__file__).resolve().parents[3])


def _command() -> list[str]:
    script = Path(sys.executable).parent / "hermes-gateway"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gateway.cli"]


async def chat(home: Path, stdin: str, *args: str, timeout: float = 90.0) -> Done:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "TELEGRAM_", "API_SERVER_"))}
    # The code under test, not whatever checkout the console script was installed from (a worktree).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_CHECKOUT, env.get("PYTHONPATH")) if p)
    proc = await asyncio.create_subprocess_exec(
        *_command(), "chat", "--home", str(home), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout)
    except TimeoutError:
        proc.kill()
        out, err = await proc.communicate()
        raise AssertionError(f"chat did not finish; stdout={out.decode()!r} stderr={err.decode()!r}") from None
    assert proc.returncode is not None
    return Done(proc.returncode, out.decode(), err.decode())


def cli_sessions(db: Path) -> list[tuple[Any, ...]]:
    return rows(db, "SELECT id, source, title, message_count FROM sessions WHERE source = 'cli' ORDER BY started_at")


async def test_piped_chat_prints_replies_and_stores_a_terminal_session(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        done = await chat(gateway_home, "hello\n\n/title Piped talk\nsecond line\n")
        assert done.code == 0, done
        lines = done.out.splitlines()
        assert lines[0] == "echo: hello"
        assert "Piped talk" in lines[1]
        assert lines[2] == "echo: second line"
        [(sid, source, title, count)] = cli_sessions(gw.db_path)
        assert TERMINAL_ID.match(sid) and source == "cli"
        assert (title, count) == ("Piped talk", 4)
        assert f"hermes-gateway chat -r {sid}" in done.err
        key = rows(gw.db_path, "SELECT session_key FROM gateway_session_index WHERE session_id = ?", sid)
        assert key and key[0][0].startswith("agent:main:cli:dm:term-")


async def test_continue_resumes_the_latest_terminal_session_with_a_recap(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        first = await chat(gateway_home, "the first question\n")
        assert first.code == 0, first
        [(sid, *_)] = cli_sessions(gw.db_path)

        again = await chat(gateway_home, "and a follow-up\n", "-c")
        assert again.code == 0, again
        lines = again.out.splitlines()
        assert lines[0].startswith(f"Resumed session {sid}")  # and its title, if one was given
        assert "  ● the first question" in lines
        assert "  ◆ echo: the first question" in lines
        assert lines[-1] == "echo: and a follow-up"
        assert [r[0] for r in cli_sessions(gw.db_path)] == [sid]  # same session, no new one
        # The model saw the earlier turn: the history came from state.db.
        sent = fake_openai.chat_requests[-1].body["messages"]
        assert [m["content"] for m in sent if m["role"] == "user"] == ["the first question", "and a follow-up"]


async def test_resume_by_title_and_continue_by_title(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        assert (await chat(gateway_home, "about the roof\n/title Roof repair\n")).code == 0
        assert (await chat(gateway_home, "about the garden\n")).code == 0  # the latest, but not the one
        sessions = cli_sessions(gw.db_path)
        assert len(sessions) == 2
        roof = next(s[0] for s in sessions if s[2] == "Roof repair")

        by_r = await chat(gateway_home, "more on the roof\n", "-r", "Roof repair")
        assert by_r.code == 0, by_r
        assert by_r.out.splitlines()[0] == f'Resumed session {roof} "Roof repair"'
        assert "  ● about the roof" in by_r.out.splitlines()

        by_c = await chat(gateway_home, "one more\n", "-c", "Roof", "repair")  # multi-word, no quotes
        assert by_c.code == 0, by_c
        assert by_c.out.splitlines()[0].startswith(f"Resumed session {roof}")

        by_prefix = await chat(gateway_home, "", "-r", roof[:-2])
        assert by_prefix.code == 0 and by_prefix.out.startswith(f"Resumed session {roof}")

        count = rows(gw.db_path, "SELECT message_count FROM sessions WHERE id = ?", roof)[0][0]
        assert count == 6

        missing = await chat(gateway_home, "x\n", "-r", "No such thing")
        assert missing.code == 1
        assert "No session has the id, id prefix or title 'No such thing'" in missing.err


async def test_without_a_daemon_chat_says_how_to_start_one(tmp_path: Path) -> None:
    home = tmp_path / "idle-home"
    done = await chat(home, "hello\n")
    assert done.code == 69
    assert "not running" in done.err and "hermes-gateway run" in done.err and "--standalone" in done.err
    assert done.out == ""


async def test_standalone_runs_the_daemon_in_process(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "solo"
    write_config(home, {
        "model": {"base_url": fake_openai.base_url, "default": "fake-model", "max_retries": 0, "timeout": 30},
        "storage": {"synchronous": "NORMAL"},
        "logging": {"format": "json", "level": "warning"},
    })
    done = await chat(home, "alone here\n", "--standalone")
    assert done.code == 0, done
    assert done.out.splitlines() == ["echo: alone here"]
    [(sid, _source, _title, count)] = cli_sessions(home / "state.db")
    assert TERMINAL_ID.match(sid) and count == 2
    assert not (home / "gateway.sock").exists()  # the in-process daemon cleaned up

    # Continue it standalone too; and with a daemon running, --standalone is refused clearly.
    cont = await chat(home, "still alone\n", "--standalone", "-c")
    assert cont.code == 0, cont
    assert cont.out.splitlines()[0].startswith(f"Resumed session {sid}")
    async with run_gateway(home, fake_openai.base_url):
        clash = await chat(home, "x\n", "--standalone")
        assert clash.code == 1
        assert "without --standalone" in clash.err and clash.out == ""


async def test_handoff_from_the_terminal_exits_when_done(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW) as gw:
        await gw.chat.say("/sethome", user="u1")
        await gw.chat.wait_sent(1, chat="u1")
        done = await chat(gateway_home, "plan the trip\n/handoff testchat\nnever sent\n")
        assert done.code == 0, done
        assert "echo: plan the trip" in done.out
        assert "⏳ Handing this session over to testchat…" in done.out
        assert "Handoff complete: handed off to testchat" in done.out and "/resume " in done.out
        assert "never sent" not in done.out
        users = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE role = 'user'")]
        assert "never sent" not in users


async def test_oversized_lines_are_refused_and_the_chat_goes_on(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url):
        huge = "x" * (2 * 1024 * 1024)  # beyond what the socket takes
        long = "y" * 40_000  # beyond what the router takes
        done = await chat(gateway_home, f"{huge}\n{long}\nafter that\n")
        assert done.code == 0, done.err[:500]
        assert "too large to send" in done.err
        lines = done.out.splitlines()
        assert "too long (40000 characters" in lines[0]
        assert lines[1] == "echo: after that"


async def test_continue_without_an_earlier_session_starts_a_new_one(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        done = await chat(gateway_home, "first ever\n", "-c")
        assert done.code == 0, done
        assert "No earlier terminal session" in done.err
        assert done.out.splitlines() == ["echo: first ever"]
        assert len(cli_sessions(gw.db_path)) == 1


async def test_the_chat_says_so_when_the_daemon_stops(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        cli = gw.gateway.services.adapters["cli"] if gw.gateway.services else None
        assert isinstance(cli, CliAdapter)
        proc = await asyncio.create_subprocess_exec(
            *_command(), "chat", "--home", str(gateway_home),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        await until(lambda: cli.open_chats == 1, "the terminal connected")
    # stdin stays open: the chat is idle at its prompt when the daemon goes away
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 1
    assert "The daemon closed the connection" in err.decode() and out == b""


async def seed_session(db: Path, session_id: str) -> None:
    async with StateStore(db, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        await store.create_session(session_id, "cli", user_id="someone")
        await store.append_message(session_id, "user", "look this up " + "z" * 400)
        call = {"id": "c1", "type": "function", "function": {"name": "web_search", "arguments": "{}"}}
        await store.append_message(session_id, "assistant", None, tool_calls=[call])
        await store.append_message(session_id, "tool", "results", tool_call_id="c1", tool_name="web_search")
        await store.append_message(session_id, "assistant", "Here is what I found.")


async def test_recap_shows_tool_calls_and_shortens_long_turns(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    sid = "20250305_091523_a1b2c3"
    await seed_session(gateway_home / "state.db", sid)
    async with run_gateway(gateway_home, fake_openai.base_url):
        done = await chat(gateway_home, "", "-r", sid)
    assert done.code == 0, done
    lines = done.out.splitlines()
    assert lines[0] == f"Resumed session {sid}"
    assert lines[1].startswith("  ● look this up zzz") and lines[1].endswith("…") and len(lines[1]) < 320
    assert lines[2] == "  ◆ [1 tool call: web_search]"
    assert lines[3] == "  ◆ Here is what I found."
    assert "results" not in done.out  # tool output is not part of the recap


async def test_minimal_resume_display_opens_with_one_line(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    """``display: resume_display: minimal`` (the reference's setting): no recap, one line."""
    sid = "20250305_091523_a1b2c3"
    await seed_session(gateway_home / "state.db", sid)
    async with run_gateway(gateway_home, fake_openai.base_url, config={"display": {"resume_display": "minimal"}}):
        done = await chat(gateway_home, "and now?\n", "-r", sid)
    assert done.code == 0, done
    assert done.out.splitlines() == [f"Resumed session {sid} (4 messages)", "echo: and now?"]


async def test_a_title_queued_in_a_terminal_that_quit_blocks_nothing(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        quit_early = await chat(gateway_home, "/title Desk work\n/quit\n")
        assert quit_early.code == 0 and 'Title "Desk work" saved' in quit_early.out
        cli = gw.gateway.services.adapters["cli"] if gw.gateway.services else None
        assert isinstance(cli, CliAdapter)
        await until(lambda: cli.open_chats == 0, "the daemon closed that terminal's chat")
        # That terminal's chat is gone for good: so is its queued title.
        assert rows(gw.db_path, "SELECT COUNT(*) FROM gateway_pending_titles") == [(0,)]
        later = await chat(gateway_home, "/title Desk work\nfirst words\n")
        assert later.code == 0, later
        assert [s[2] for s in cli_sessions(gw.db_path)] == ["Desk work"]


async def test_resume_inside_the_terminal_follows_the_login_not_the_connection(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    """Every terminal connection is a new chat; the owner of terminal sessions is the login.
    Sessions that lived elsewhere (a chat platform) are not the terminal's to resume."""
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW) as gw:
        assert (await chat(gateway_home, "about the roof\n/title Roof repair\n")).code == 0
        await gw.chat.say("phone only", user="u1")
        await gw.chat.wait_sent(1, chat="u1")
        await gw.chat.say("/title Phone notes", user="u1")
        await gw.chat.wait_sent(2, chat="u1")
        done = await chat(gateway_home, "/resume Roof repair\nmore roof\n/resume Phone notes\n")
        assert done.code == 0, done
        lines = done.out.splitlines()
        assert lines[0].startswith('↻ Resumed session "Roof repair" (2 messages)')
        assert lines[1] == "echo: more roof"
        assert lines[2] == ("⚠️ /resume refused: that session belongs to a different user or chat. "
                            "You can only resume sessions from this chat.")
        assert "phone only" not in done.out
