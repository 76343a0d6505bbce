"""``hermes-gateway sessions browse``: a plain list without a terminal (a subprocess on pipes);
on a terminal (a pty) a picker whose Enter resumes the picked session in ``chat``."""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from gateway.cli.picker import PickerState, decode_keys
from storage import StateStore, WriterSettings
from tests.gateway._console import ROOT, SCRIPT, TIMEOUT, console_env
from tests.gateway.cli.test_sessions_cli import cli

AUTH = "20250305_091523_a1b2c3"
OSLO = "20250306_101010_d4e5f6"
DOWN, ENTER, ESC = "\x1b[B", "\r", "\x1b"


async def _seed(db: Path) -> None:
    now = time.time()
    async with StateStore(db, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        for sid, text, age in ((AUTH, "Help me refactor the auth module please", 7200.0),
                               (OSLO, "Plan the trip to Oslo in May", 600.0)):
            await store.create_session(sid, "cli", started_at=now - age)
            await store.append_message(sid, "user", text, timestamp=now - age + 1)
            await store.append_message(sid, "assistant", f"Sure: {text.lower()}", timestamp=now - age + 2)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "hermes"
    asyncio.run(_seed(h / "state.db"))
    (h / "config.yaml").write_text("logging:\n  level: warning\n")
    return h


def _read_until(master: int, seen: bytearray, marker: bytes, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT
    while marker not in seen:
        assert time.monotonic() < deadline, f"never saw {marker!r}; the terminal shows:\n{seen.decode(errors='replace')}"
        if select.select([master], [], [], 0.1)[0]:
            try:
                seen += os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
        elif proc.poll() is not None and marker not in seen:
            raise AssertionError(f"exited {proc.returncode} before {marker!r}:\n{seen.decode(errors='replace')}")


def browse_on_tty(home: Path, keys: str, *, then: bytes | None) -> tuple[int, str]:
    """Run ``sessions browse --standalone`` on a 30x120 pty, type ``keys`` into the picker; when
    ``then`` shows up (the chat opened), leave the chat with Ctrl-D. The exit code and the screen."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    proc = subprocess.Popen([str(SCRIPT), "sessions", "browse", "--standalone"], env=console_env(home), cwd=ROOT,
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()
    try:
        _read_until(master, seen, b"filter \xe2\x80\xba", proc)
        os.write(master, keys.encode())  # several keys in one read are taken in order
        if then is not None:
            _read_until(master, seen, then, proc)
            _read_until(master, seen, "› ".encode(), proc)
            os.write(master, b"\x04")
        code = proc.wait(TIMEOUT)
        while select.select([master], [], [], 0)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return code, seen.decode(errors="replace")


def test_without_a_terminal_it_prints_the_plain_list(home: Path) -> None:
    ago = re.compile(r"\d+[mh] ago")
    r = cli(home, "browse")
    assert r.code == 0, r.err
    listed = cli(home, "list", "--limit", "200").out
    # The same table (the relative times may have moved on a minute between the two runs, and
    # "9m ago" -> "10m ago" widens its column).
    def cells(out: str) -> list[list[str]]:
        return [ago.sub("", line).split() for line in out.splitlines()]

    assert cells(r.out) == cells(listed)
    assert OSLO in r.out and AUTH in r.out and "\x1b" not in r.out


def test_typing_filters_and_enter_resumes_the_match_in_chat(home: Path) -> None:
    code, screen = browse_on_tty(home, "auth" + ENTER, then=f"Resumed session {AUTH}".encode())
    assert code == 0, screen
    assert "● Help me refactor the auth module please" in screen
    assert f"Resumed session {OSLO}" not in screen


def test_arrows_move_and_enter_resumes_the_row(home: Path) -> None:
    # Newest first: Oslo, then auth; one row down is auth.
    code, screen = browse_on_tty(home, DOWN + ENTER, then=f"Resumed session {AUTH}".encode())
    assert code == 0, screen
    assert "Resumed session" in screen and f"Resumed session {OSLO}" not in screen


def test_escape_leaves_without_resuming_and_gives_the_terminal_back(home: Path) -> None:
    code, screen = browse_on_tty(home, ESC, then=None)
    assert code == 0 and "Resumed session" not in screen
    assert screen.rstrip().endswith("\x1b[?1049l")  # the alternate screen is closed again


def test_picker_state_filters_moves_and_clamps() -> None:
    state = PickerState(["alpha one", "beta two", "gamma three"])
    assert list(decode_keys("\x1b[Bx\x7f\r\x1bOA")) == ["down", "x", "backspace", "enter", "up"]
    for key in ["down", "down", "down"]:
        state.press(key)
    assert state.selected == 2
    for ch in "TWO":
        state.press(ch)
    assert state.visible == [1] and state.selected == 1
    state.press("clear")
    assert state.visible == [0, 1, 2] and state.selected == 0
    state.press("q")
    assert state.selected is None and state.press("enter") is False
