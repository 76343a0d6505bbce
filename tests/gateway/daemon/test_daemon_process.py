"""The daemon as a real process: exit codes, SIGTERM drain, kill -9 and restart."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port

ROOT = Path(__file__).resolve().parents[3]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER", "GATEWAY_"))}
    env["HERMES_HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT)
    return env


def _write(home: Path, config: dict[str, Any]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config))


def _config(base_url: str | None, port: int, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"platforms": {"api_server": {"port": port}}, "logging": {"format": "json"}}
    if base_url:
        cfg["model"] = {"base_url": base_url, "default": "fake-model", "max_retries": 0}
    cfg.update(extra)
    return cfg


@contextmanager
def daemon(home: Path) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", "run"],
        env=_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)


async def wait_healthy(port: int, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(int(timeout / 0.05)):
            if proc.poll() is not None:
                raise AssertionError(f"daemon exited early with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}")
            try:
                r = await client.get(f"http://127.0.0.1:{port}/readyz")  # /healthz is liveness only
                if r.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)
    raise AssertionError("daemon never became healthy")


async def wait_exit(proc: subprocess.Popen[str], timeout: float = 40) -> int:
    for _ in range(int(timeout / 0.05)):
        if proc.poll() is not None:
            return proc.returncode
        await asyncio.sleep(0.05)
    raise AssertionError("daemon did not exit")


def ask(port: int, text: str, user: str = "alice") -> dict[str, Any]:
    r = httpx.post(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        json={"messages": [{"role": "user", "content": text}], "user": user},
        timeout=60,
    )
    return {"status": r.status_code, "text": r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.text}


def db_rows(home: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(home / "state.db")
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_unknown_config_key_exits_78_naming_key_and_file(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _write(home, {"model": {"base_url": "http://127.0.0.1:1/v1", "defualt": "typo"}})
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "run"], env=_env(home), capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 78
    assert "model.defualt" in proc.stderr and str(home / "config.yaml") in proc.stderr


def test_invalid_value_exits_78(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _write(home, {"gateway": {"drain_timeout": "soon"}})
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "run"], env=_env(home), capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 78 and "gateway.drain_timeout" in proc.stderr


def test_api_beyond_loopback_without_key_exits_78(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _write(home, {"platforms": {"api_server": {"host": "0.0.0.0", "port": free_port()}}})
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "run"], env=_env(home), capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 78 and "API_SERVER_KEY" in proc.stderr


async def test_second_daemon_on_same_home_exits_78(tmp_path: Path) -> None:
    home = tmp_path / "h"
    port = free_port()
    _write(home, _config(None, port))
    with daemon(home) as first:
        await wait_healthy(port, first)
        _write(home, _config(None, free_port()))
        second = subprocess.run([sys.executable, "-m", "gateway.cli", "run"], env=_env(home), capture_output=True,
                                text=True, timeout=60, cwd=ROOT)
        assert second.returncode == 78
        assert str(first.pid) in second.stderr
        assert first.poll() is None  # the first one is unaffected


async def test_sigterm_when_idle_exits_0_and_truncates_wal(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "h"
    port = free_port()
    _write(home, _config(fake_openai.base_url, port))
    with daemon(home) as proc:
        await wait_healthy(port, proc)
        result = await asyncio.to_thread(ask, port, "remember me")
        assert result == {"status": 200, "text": "echo: remember me"}
        proc.send_signal(signal.SIGTERM)
        assert await wait_exit(proc) == 0
    wal = home / "state.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    assert db_rows(home, "PRAGMA integrity_check") == [("ok",)]
    assert db_rows(home, "SELECT content FROM messages ORDER BY id") == [("remember me",), ("echo: remember me",)]


async def test_sigterm_mid_turn_lets_the_turn_finish(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "h"
    port = free_port()
    _write(home, _config(fake_openai.base_url, port))
    with daemon(home) as proc:
        await wait_healthy(port, proc)
        fake_openai.delay(1.5)
        pending = asyncio.create_task(asyncio.to_thread(ask, port, "slow question"))
        for _ in range(200):
            if fake_openai.chat_requests:
                break
            await asyncio.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert (await pending) == {"status": 200, "text": "echo: slow question"}
        assert await wait_exit(proc) == 0
    assert db_rows(home, "SELECT role FROM messages ORDER BY id") == [("user",), ("assistant",)]


async def test_kill_9_mid_turn_then_restart_carries_on(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "h"
    port = free_port()
    _write(home, _config(fake_openai.base_url, port))
    with daemon(home) as proc:
        await wait_healthy(port, proc)
        fake_openai.hang()
        pending = asyncio.create_task(asyncio.to_thread(ask, port, "lost in flight?"))
        for _ in range(300):
            if fake_openai.chat_requests:
                break
            await asyncio.sleep(0.02)
        assert fake_openai.chat_requests, "the turn never reached the model"
        proc.kill()
        assert await wait_exit(proc) == -signal.SIGKILL
        with pytest.raises(httpx.TransportError):
            await pending
    # The user's message was committed before the model was called.
    assert db_rows(home, "SELECT role, content FROM messages") == [("user", "lost in flight?")]
    assert db_rows(home, "PRAGMA integrity_check") == [("ok",)]
    with daemon(home) as proc:
        await wait_healthy(port, proc)
        result = await asyncio.to_thread(ask, port, "are you back?")
        assert result == {"status": 200, "text": "echo: are you back?"}
        proc.send_signal(signal.SIGTERM)
        assert await wait_exit(proc) == 0
    contents = [r[0] for r in db_rows(home, "SELECT content FROM messages ORDER BY id")]
    assert contents == ["lost in flight?", "are you back?", "echo: are you back?"]
    # Same chat, same session, and the model saw the earlier message as history.
    assert db_rows(home, "SELECT COUNT(*) FROM sessions") == [(1,)]
    assert "lost in flight?" in str(fake_openai.chat_requests[-1].body["messages"])


def _run_once(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", "run"], env={**_env(home), **env},
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_a_port_in_use_exits_78_saying_which_address_and_what_to_change(tmp_path: Path) -> None:
    home = tmp_path / "h"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _write(home, _config(None, port))
        proc = _run_once(home)
        assert proc.returncode == 78
        message = proc.stderr.strip()
        assert "\n" not in message, message
        assert f"127.0.0.1:{port}" in message and "already in use" in message
        assert f"platforms.api_server.port in {home / 'config.yaml'}" in message
        # Set from the environment, the port is changed there: config.yaml would not help.
        _write(home, _config(None, free_port()))
        proc = _run_once(home, API_SERVER_PORT=str(port))
        assert proc.returncode == 78
        assert f"127.0.0.1:{port}" in proc.stderr and "API_SERVER_PORT" in proc.stderr
        assert "platforms.api_server.port in" not in proc.stderr


def test_an_address_not_of_this_machine_exits_78_naming_the_host_setting(tmp_path: Path) -> None:
    home = tmp_path / "h"
    _write(home, {"platforms": {"api_server": {"host": "192.0.2.1", "port": free_port()}},
                  "logging": {"format": "json"}})
    proc = _run_once(home, API_SERVER_KEY="k" * 32)  # beyond loopback a key is required first
    assert proc.returncode == 78
    assert "192.0.2.1" in proc.stderr and "not an address of this machine" in proc.stderr
    assert "platforms.api_server.host" in proc.stderr and "already in use" not in proc.stderr
