"""The daemon as a real process when a connection flood meets its descriptor limit: the log stays
small (asyncio reports every failed accept, thousands of lines a second), and it recovers."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections import Counter
from pathlib import Path

import httpx

from gateway.logs import REPEAT_BURST

from ._proc import WAIT, Daemon, free_port, run_daemon, write_home

ACCEPT_ERROR = "socket.accept() out of system resource"
FD_LIMIT = 128
FLOOD = 300  # well beyond what 128 descriptors hold: the kernel queues them, the daemon cannot take them


def _accept_errors(d: Daemon) -> int:
    with d._cond:
        return sum(1 for line in d.lines if ACCEPT_ERROR in line)


async def test_running_out_of_descriptors_logs_a_few_lines_and_the_daemon_recovers(tmp_path: Path) -> None:
    home, port = tmp_path / "h", free_port()
    # A cap above what the limit can hold (the daemon warns about it): the descriptors run out first.
    write_home(home, port, None, platforms={"api_server": {"port": port, "max_connections": 1000}})
    with run_daemon(home, port, fd_limit=FD_LIMIT) as d:
        await d.wait_healthy()
        assert d.wait_event("http.cap_above_fd_limit")["fd_limit"] == FD_LIMIT
        conns = []
        try:
            for _ in range(FLOOD):
                conns.append(await asyncio.open_connection("127.0.0.1", port))
            first = threading.Event()

            def seen() -> None:
                with d._cond:
                    d._cond.wait_for(lambda: _accept_errors(d) > 0, WAIT)
                first.set()

            await asyncio.to_thread(seen)
            assert first.is_set(), "the descriptors never ran out: the test floods too little"
            # The old daemon wrote thousands of lines in this time; a burst is all that may pass.
            await asyncio.sleep(3.0)
        finally:
            for _, writer in conns:
                writer.close()
        async with httpx.AsyncClient(timeout=WAIT) as client:
            async def healthy() -> None:
                while True:
                    try:
                        if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                            return
                    except httpx.TransportError:
                        pass
                    await asyncio.sleep(0.1)

            await asyncio.wait_for(healthy(), WAIT)
        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait_exit() == 0
    errors = _accept_errors(d)
    assert 1 <= errors <= REPEAT_BURST, f"{errors} accept errors logged"
    common = Counter(line[:160] for line in d.lines).most_common(3)
    assert len(d.lines) < 200, f"{len(d.lines)} log lines, most often: {common}"
