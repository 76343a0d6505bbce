"""``hermes-gateway chat --standalone`` leaves cleanly, as a real process: at end of input, on
SIGINT at rest and while a reply is being written (piped), and on Ctrl-C typed on a terminal.
No traceback, no error line, the in-process daemon's log on stderr, the daemon stopped (its
socket gone) and the conversation stored."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import select
import signal
import sqlite3
import subprocess
import termios
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.cli.test_cli_chat import _command
from tests.gateway.conftest import write_config

WAIT = 60.0  # a guard against a hung process, not a measure of anything


def _home(tmp_path: Path, fake_openai: FakeOpenAI) -> Path:
    home = tmp_path / "solo"
    write_config(home, {
        "model": {"base_url": fake_openai.base_url, "default": "fake-model", "max_retries": 0, "timeout": 30},
        "storage": {"synchronous": "NORMAL"},
        "agent": {"auto_title": False},  # the model's requests are the chat's only
        # JSON: any error the in-process daemon logs is a line with "level": "error" on stderr.
        "logging": {"format": "json", "level": "warning"},
    })
    return home


async def _start(home: Path) -> asyncio.subprocess.Process:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "TELEGRAM_", "API_SERVER_"))}
    return await asyncio.create_subprocess_exec(
        *_command(), "chat", "--standalone", "--home", str(home),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )


async def _say(proc: asyncio.subprocess.Process, text: str) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"{text}\n".encode())
    await proc.stdin.drain()
    line = await asyncio.wait_for(proc.stdout.readline(), WAIT)
    assert line.decode().rstrip("\n") == f"echo: {text}"


async def _finish(proc: asyncio.subprocess.Process, more: str = "") -> tuple[int, str]:
    """The exit code and stderr; stdout has nothing after what was read but ``more``
    (the daemon's log is not for stdout)."""
    try:
        out, err = await asyncio.wait_for(proc.communicate(), WAIT)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode is not None
    assert out.decode() == more, out
    return proc.returncode, err.decode()


def _assert_clean(err: str) -> None:
    assert "Traceback" not in err and "Exception in" not in err, err
    assert '"level": "error"' not in err and "KeyboardInterrupt" not in err, err
    assert "closed the connection" not in err, err


def _stored(home: Path) -> list[tuple[str, int]]:
    conn = sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT source, message_count FROM sessions").fetchall()
    finally:
        conn.close()


async def test_end_of_input_leaves_quietly(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = _home(tmp_path, fake_openai)
    proc = await _start(home)
    await _say(proc, "hello")
    assert proc.stdin is not None
    proc.stdin.close()
    code, err = await _finish(proc)
    assert code == 0, err
    _assert_clean(err)
    assert "Resume it with: hermes-gateway chat -r " in err
    assert _stored(home) == [("cli", 2)] and not (home / "gateway.sock").exists()


async def test_the_in_process_daemon_logs_to_stderr_not_into_the_chat(tmp_path: Path) -> None:
    home = tmp_path / "solo"
    write_config(home, {"storage": {"synchronous": "NORMAL"}, "logging": {"format": "json"}})  # no model
    proc = await _start(home)
    assert proc.stdin is not None
    proc.stdin.close()
    code, err = await _finish(proc)
    assert code == 0 and '"event": "model.not_configured"' in err
    _assert_clean(err)


async def test_ctrl_c_at_rest_leaves_quietly(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = _home(tmp_path, fake_openai)
    proc = await _start(home)
    await _say(proc, "hello")
    proc.send_signal(signal.SIGINT)  # stdin stays open: the chat is waiting for the next line
    code, err = await _finish(proc)
    assert code == 130, err
    _assert_clean(err)
    assert _stored(home) == [("cli", 2)] and not (home / "gateway.sock").exists()


async def test_ctrl_c_while_a_reply_is_written_stops_it_and_leaves_quietly(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = _home(tmp_path, fake_openai)
    proc = await _start(home)
    await _say(proc, "hello")
    fake_openai.hang()
    assert proc.stdin is not None
    proc.stdin.write(b"a question the model never answers\n")
    await proc.stdin.drain()

    async def asked() -> None:
        while len(fake_openai.chat_requests) < 2:
            await asyncio.sleep(0.02)

    await asyncio.wait_for(asked(), WAIT)
    proc.send_signal(signal.SIGINT)
    # The reply is stopped before the chat leaves: the in-process daemon has no turn left to wait for.
    code, err = await _finish(proc, "⚡ Stopped. Everything said so far is kept; you can continue this session.\n")
    assert code == 130, err
    _assert_clean(err)
    assert _stored(home) == [("cli", 3)] and not (home / "gateway.sock").exists()


class _Terminal:
    """The chat on a pseudo-terminal that is its controlling terminal: Ctrl-C is a keystroke."""

    def __init__(self, home: Path) -> None:
        self.master, slave = pty.openpty()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "TELEGRAM_", "API_SERVER_"))}

        def controlling_terminal() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen([*_command(), "chat", "--standalone", "--home", str(home)], stdin=slave,
                                     stdout=slave, stderr=slave, env=env, preexec_fn=controlling_terminal)
        os.close(slave)
        self.seen = ""

    def _read(self) -> bytes | None:
        """What the terminal shows next; None when nothing came for a second; b"" once it is closed."""
        if not select.select([self.master], [], [], 1.0)[0]:
            return None
        try:
            return os.read(self.master, 4096)
        except OSError:  # the child closed the terminal
            return b""

    async def read_until(self, text: str) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT
        while text not in self.seen:
            assert loop.time() < deadline, self.seen
            chunk = await asyncio.to_thread(self._read)
            assert chunk != b"", f"the terminal closed before {text!r}: {self.seen}"
            self.seen += (chunk or b"").decode(errors="replace")

    def type(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    async def exit_code(self) -> int:
        code = await asyncio.wait_for(asyncio.to_thread(self.proc.wait), WAIT)
        while chunk := await asyncio.to_thread(self._read):  # what it wrote on its way out
            self.seen += chunk.decode(errors="replace")
        os.close(self.master)
        return code


async def test_ctrl_c_on_a_terminal_stops_the_reply_then_leaves_quietly(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = _home(tmp_path, fake_openai)
    term = _Terminal(home)
    try:
        await term.read_until("› ")
        term.type("hello\r")
        await term.read_until("echo: hello\r\n› ")
        fake_openai.hang()
        term.type("a question the model never answers\r")
        while len(fake_openai.chat_requests) < 2:
            await asyncio.sleep(0.02)
        term.type("\x03")  # Ctrl-C while the reply is written: stop it, stay
        await term.read_until("⚡ Stopped.")
        await term.read_until("› ")
        term.type("\x03")  # Ctrl-C at the prompt: leave
        assert await term.exit_code() == 0, term.seen
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    _assert_clean(term.seen)
    assert "Resume it with: hermes-gateway chat -r " in term.seen
    assert _stored(home) == [("cli", 3)] and not (home / "gateway.sock").exists()
