"""The control socket of a real daemon process: kill -9 leaves a stale socket,
the next daemon replaces it, and the terminal chat carries on."""

from __future__ import annotations

import signal
import stat
from pathlib import Path

from gateway.control.client import socket_path
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.cli.test_cli_chat import chat, cli_sessions
from tests.gateway.conftest import free_port
from tests.gateway.daemon.test_daemon_process import _config, _write, daemon, wait_exit, wait_healthy


def is_socket(path: Path) -> bool:
    return path.exists() and stat.S_ISSOCK(path.lstat().st_mode)


async def test_a_killed_daemons_socket_is_replaced_by_the_next(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home, port = tmp_path / "h", free_port()
    _write(home, _config(fake_openai.base_url, port))
    sock = socket_path(home)
    with daemon(home) as proc:
        await wait_healthy(port, proc)
        assert stat.S_IMODE(sock.lstat().st_mode) == 0o600
        before = await chat(home, "before the crash\n")
        assert before.code == 0, before
        assert before.out.splitlines() == ["echo: before the crash"]
        proc.kill()
        proc.wait(timeout=30)
    assert is_socket(sock)  # nobody cleaned up after kill -9

    stale = await chat(home, "anyone?\n")
    assert stale.code == 69 and "not running" in stale.err

    with daemon(home) as proc:
        await wait_healthy(port, proc)
        after = await chat(home, "after the crash\n", "-c")
        assert after.code == 0, after
        lines = after.out.splitlines()
        assert lines[0].startswith("Resumed session ")
        assert "  ● before the crash" in lines and lines[-1] == "echo: after the crash"
        proc.send_signal(signal.SIGTERM)
        assert await wait_exit(proc) == 0
    assert not sock.exists()
    assert len(cli_sessions(home / "state.db")) == 1
