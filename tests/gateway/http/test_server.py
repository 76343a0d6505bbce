"""The daemon's HTTP server under hostile clients: silent and half-sent connections are closed,
a flood of them neither starves /healthz nor the descriptors, the cap answers 503, a big body
413 — on real sockets against the in-process daemon."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import resource
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.http import HttpServer
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import Running, free_port, run_gateway

WAIT = 30.0
HALF_HEADER = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # no blank line: the header never ends


def api(**limits: Any) -> dict[str, Any]:
    return {"platforms": {"api_server": {"port": free_port(), **limits}}}


def server_of(gw: Running) -> HttpServer:
    assert gw.gateway.http_server is not None
    return gw.gateway.http_server


Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connect(port: int, send: bytes = b"") -> Conn:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    if send:
        writer.write(send)
        await writer.drain()
    return reader, writer


async def until_closed(conn: Conn) -> bytes:
    """Everything the server sends until it closes the connection."""
    reader, _ = conn
    return await asyncio.wait_for(reader.read(), WAIT)


@contextlib.asynccontextmanager
async def held(conns: list[Conn]) -> AsyncIterator[list[Conn]]:
    try:
        yield conns
    finally:
        for _, writer in conns:
            writer.close()


async def until(check: Any, what: str) -> None:
    async def poll() -> None:
        while not check():
            await asyncio.sleep(0.02)

    try:
        await asyncio.wait_for(poll(), WAIT)
    except TimeoutError:
        raise AssertionError(f"never: {what}") from None


async def test_silent_half_sent_and_idle_connections_are_closed_after_the_keepalive_timeout(tmp_path: Path) -> None:
    async with run_gateway(tmp_path / "h", None, config=api(keepalive_timeout=0.5)) as gw:
        port = gw.gateway.http_port
        assert port is not None
        silent = await connect(port)
        half = await connect(port, HALF_HEADER)
        done = await connect(port, HALF_HEADER + b"\r\n")  # a whole request, then nothing more
        async with held([silent, half, done]):
            assert await until_closed(silent) == b""
            assert await until_closed(half) == b""
            answer = await until_closed(done)
        # The request was answered (keep-alive), and the connection closed once it sat idle.
        assert answer.startswith(b"HTTP/1.1 200") and b'"status": "ok"' in answer
        await until(lambda: server_of(gw).connections == 0, "every connection counted out")


def _room_for(fds: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < fds:
        if hard != resource.RLIM_INFINITY and hard < fds:
            pytest.skip(f"needs {fds} file descriptors; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (fds, hard))


FLOOD = 2000


async def test_a_flood_of_idle_connections_leaves_healthz_answering_and_is_closed(tmp_path: Path) -> None:
    # Both ends of every connection live in this process, plus the daemon's own descriptors; the
    # cap (half the limit unless set) must stay above the flood for /healthz to get in.
    _room_for(4 * FLOOD + 1024)
    async with run_gateway(tmp_path / "h", None, config=api(keepalive_timeout=2.0)) as gw:
        port = gw.gateway.http_port
        assert port is not None
        assert server_of(gw).max_connections > FLOOD
        flood = await asyncio.gather(*(connect(port, HALF_HEADER if i % 2 else b"") for i in range(FLOOD)))
        async with held(flood):
            # While they are all open, a health check still gets in and is answered.
            assert server_of(gw).connections >= FLOOD
            live = await gw.http.get("/healthz")
            assert live.status_code == 200 and live.json()["status"] == "ok"
            answers = await asyncio.gather(*(until_closed(c) for c in flood))
        assert set(answers) == {b""}  # closed by the server, without an answer to a request never made
        await until(lambda: server_of(gw).connections <= 1, "the flood counted out")  # (httpx's own may stay)
        assert server_of(gw).refused == 0


async def test_connections_beyond_max_connections_are_answered_503_and_closed(tmp_path: Path) -> None:
    async with run_gateway(tmp_path / "h", None, config=api(max_connections=20, keepalive_timeout=60)) as gw:
        port = gw.gateway.http_port
        assert port is not None
        idle = [await connect(port) for _ in range(20)]
        async with held(idle):
            await until(lambda: server_of(gw).connections == 20, "20 connections open")
            refused = await until_closed(await connect(port, HALF_HEADER + b"\r\n"))
            assert refused.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in refused
            assert server_of(gw).refused == 1 and server_of(gw).connections == 20
            for _, writer in idle[:5]:
                writer.close()
            await until(lambda: server_of(gw).connections == 15, "the closed ones counted out")
            ok = await until_closed(await connect(port, HALF_HEADER + b"Connection: close\r\n\r\n"))
            assert ok.startswith(b"HTTP/1.1 200")


async def test_a_body_over_max_request_bytes_is_answered_413(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(tmp_path / "h", fake_openai.base_url, config=api(max_request_bytes=4096)) as gw:
        small = await gw.ask("x" * 1000)
        assert small.status_code == 200, small.text
        big = await gw.ask("x" * 8000)
        assert big.status_code == 413
        assert len(fake_openai.chat_requests) == 1  # the big one never reached the model


async def test_what_start_up_built_is_out_of_the_collectors_sight_while_serving(tmp_path: Path) -> None:
    """A full collection walked every object of the process, paused the loop for 100-500 ms under a
    flood (bench/http.py); what start-up built is frozen out of it, and handed back at the stop."""
    gc.unfreeze()
    async with run_gateway(tmp_path / "h", None):
        assert gc.get_freeze_count() > 10_000
    assert gc.get_freeze_count() == 0
