"""sd_notify against a real AF_UNIX datagram socket: in-process, and with the daemon as systemd runs it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.daemon.sdnotify import SdNotifier
from tests.fakes.openai_server import FakeOpenAI

from ._proc import ask, free_port, run_daemon, write_home

WAIT = 30.0


class NotifySocket:
    """What systemd's end of NOTIFY_SOCKET receives, one datagram per message."""

    def __init__(self, address: str | bytes) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(address)
        self.sock.settimeout(WAIT)
        self.messages: list[dict[str, str]] = []

    def receive(self) -> dict[str, str]:
        data = self.sock.recv(4096).decode()
        fields = dict(line.split("=", 1) for line in data.splitlines() if "=" in line)
        self.messages.append(fields)
        return fields

    def until(self, key: str) -> dict[str, str]:
        """Datagrams until one carries ``key`` (socket.timeout fails the test after WAIT)."""
        while True:
            fields = self.receive()
            if key in fields:
                return fields

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def notify_path(tmp_path: Path) -> Iterator[Path]:
    # AF_UNIX paths are limited to 107 bytes; pytest's tmp_path can be long.
    path = Path("/tmp") / f"hermes-notify-{uuid.uuid4().hex[:12]}.sock"
    yield path
    path.unlink(missing_ok=True)


def test_notifier_is_inert_without_notify_socket() -> None:
    n = SdNotifier({})
    assert not n.enabled and n.watchdog_interval is None
    assert n.notify(READY=1) is False


def test_notifier_sends_to_a_path_socket(notify_path: Path) -> None:
    server = NotifySocket(str(notify_path))
    try:
        n = SdNotifier({"NOTIFY_SOCKET": str(notify_path)})
        n.ready("adapters: telegram live")
        assert server.receive() == {"READY": "1", "STATUS": "adapters: telegram live", "MAINPID": str(os.getpid())}
        n.status("line one\nline two")  # a newline would start a new assignment
        assert server.receive() == {"STATUS": "line one line two"}
        n.close()
    finally:
        server.close()


def test_notifier_sends_to_an_abstract_socket() -> None:
    name = f"hermes-test-{uuid.uuid4().hex}"
    server = NotifySocket(b"\0" + name.encode())
    try:
        n = SdNotifier({"NOTIFY_SOCKET": "@" + name})
        assert n.notify(STOPPING=1)
        assert server.receive() == {"STOPPING": "1"}
        n.close()
    finally:
        server.close()


def test_watchdog_interval_is_half_of_watchdog_usec_and_respects_watchdog_pid() -> None:
    sock = {"NOTIFY_SOCKET": "/nonexistent"}
    assert SdNotifier({**sock, "WATCHDOG_USEC": "3000000"}).watchdog_interval == 1.5
    assert SdNotifier({**sock, "WATCHDOG_USEC": "3000000", "WATCHDOG_PID": str(os.getpid())}).watchdog_interval == 1.5
    assert SdNotifier({**sock, "WATCHDOG_USEC": "3000000", "WATCHDOG_PID": "1"}).watchdog_interval is None
    assert SdNotifier({**sock, "WATCHDOG_USEC": "soon"}).watchdog_interval is None


def test_a_missing_socket_is_logged_not_raised(notify_path: Path) -> None:
    n = SdNotifier({"NOTIFY_SOCKET": str(notify_path)})  # nobody bound it
    assert n.notify(READY=1) is False


async def test_watchdog_pings_stop_while_the_event_loop_is_blocked(notify_path: Path) -> None:
    server = NotifySocket(str(notify_path))
    n = SdNotifier({"NOTIFY_SOCKET": str(notify_path), "WATCHDOG_USEC": "100000"})  # a ping every 50 ms
    task = asyncio.create_task(n.watchdog())
    try:
        for _ in range(3):
            assert await asyncio.to_thread(server.receive) == {"WATCHDOG": "1"}
        time.sleep(1.0)  # a stalled loop: ~20 pings are due, none may go out
        server.sock.setblocking(False)
        queued = 0
        with contextlib.suppress(BlockingIOError):
            while True:
                server.sock.recv(4096)
                queued += 1
        # At most what was already on its way before the stall began.
        assert queued <= 2
    finally:
        task.cancel()
        n.close()
        server.close()


async def test_daemon_under_notify_socket_sends_ready_watchdog_stopping_in_order(
    tmp_path: Path, notify_path: Path, fake_openai: FakeOpenAI
) -> None:
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url)
    server = NotifySocket(str(notify_path))
    try:
        with run_daemon(home, port, NOTIFY_SOCKET=str(notify_path), WATCHDOG_USEC="500000") as d:
            ready = await asyncio.to_thread(server.until, "READY")
            assert ready["READY"] == "1" and ready["MAINPID"] == str(d.proc.pid)
            assert "api-server live" in ready["STATUS"]
            # READY=1 means the adapters are up: the API answers at once.
            assert await asyncio.to_thread(ask, port, "hello") == (200, "echo: hello")
            watchdog = await asyncio.to_thread(server.until, "WATCHDOG")
            assert watchdog == {"WATCHDOG": "1"}
            d.proc.send_signal(signal.SIGTERM)
            stopping = await asyncio.to_thread(server.until, "STOPPING")
            assert stopping["STOPPING"] == "1" and stopping["STATUS"].startswith("draining")
            assert await d.wait_exit() == 0
        kinds = [next(k for k in ("READY", "STOPPING", "WATCHDOG", "STATUS") if k in m) for m in server.messages]
        first_ready, stop = kinds.index("READY"), kinds.index("STOPPING")
        assert first_ready < stop and "WATCHDOG" in kinds[first_ready:stop]
        assert kinds.count("READY") == 1 and kinds.count("STOPPING") == 1
    finally:
        server.close()
