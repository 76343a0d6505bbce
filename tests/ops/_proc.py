"""The daemon as a real subprocess, for the ops tests (signals, sd_notify, status)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def daemon_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HERMES_", "API_SERVER", "GATEWAY_", "NOTIFY_SOCKET", "WATCHDOG_"))}
    env["HERMES_HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def write_home(home: Path, port: int, model_url: str | None, **sections: dict[str, Any]) -> None:
    cfg: dict[str, Any] = {"platforms": {"api_server": {"port": port}}, "logging": {"format": "json"},
                           "storage": {"synchronous": "NORMAL"}}
    if model_url:
        cfg["model"] = {"base_url": model_url, "default": "fake-model", "max_retries": 0}
    for name, values in sections.items():
        cfg.setdefault(name, {}).update(values)
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(cfg))


@dataclass
class Daemon:
    proc: subprocess.Popen[str]
    port: int
    events: list[dict[str, Any]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._cond:
                self.lines.append(line)
                try:
                    event = json.loads(line)
                    if isinstance(event, dict):
                        self.events.append(event)
                except ValueError:
                    pass
                self._cond.notify_all()

    def wait_event(self, name: str, timeout: float = WAIT) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            return next((e for e in self.events if e.get("event") == name), None)

        with self._cond:
            if not self._cond.wait_for(lambda: found() is not None or self.proc.poll() is not None, timeout):
                raise AssertionError(f"no {name!r} log line within {timeout}s")
            event = found()
        if event is None:
            raise AssertionError(f"daemon exited ({self.proc.returncode}) before {name!r}: {''.join(self.lines)}")
        return event

    async def wait_healthy(self, timeout: float = WAIT) -> None:
        """Until /readyz says ready: storage writable and every adapter live (the API takes requests)."""
        async with httpx.AsyncClient() as client:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while loop.time() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError(f"daemon exited early ({self.proc.returncode}): {''.join(self.lines)}")
                try:
                    if (await client.get(f"http://127.0.0.1:{self.port}/readyz")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.05)
        raise AssertionError("daemon never became healthy")

    async def wait_exit(self, timeout: float = WAIT) -> int:
        return await asyncio.wait_for(asyncio.to_thread(self.proc.wait), timeout)


@contextmanager
def run_daemon(home: Path, port: int, *, fd_limit: int | None = None, **env: str) -> Iterator[Daemon]:
    """The daemon as a subprocess; ``fd_limit``: its soft RLIMIT_NOFILE."""

    def limit() -> None:
        if fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run"], env=daemon_env(home, **env),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            preexec_fn=limit if fd_limit is not None else None)
    d = Daemon(proc, port)
    pump = threading.Thread(target=d._pump, daemon=True)
    pump.start()
    try:
        yield d
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=WAIT)
        pump.join(timeout=WAIT)


def ask(port: int, text: str, user: str = "alice") -> tuple[int, str]:
    r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": text}], "user": user}, timeout=60)
    return r.status_code, (r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else r.text)


def db_rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()
