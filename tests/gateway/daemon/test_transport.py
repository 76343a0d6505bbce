"""The aiohttp-backed httpx transport against real aiohttp servers on 127.0.0.1.

httpx's contract is what the model client relies on:
the request as httpx encoded it, the response undecoded for httpx to decode, and
failures as httpx's own exception types.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from aiohttp import web
from multidict import CIMultiDict

from gateway.daemon.transport import AiohttpTransport

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[str]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_request_and_response_pass_through_unchanged() -> None:
    seen: dict[str, object] = {}

    async def handler(request: web.Request) -> web.Response:
        seen.update(method=request.method, path=request.path_qs, headers=request.headers.copy(),
                    body=await request.read())
        resp = web.Response(status=201, body=b'{"ok": true}', content_type="application/json")
        resp.headers.add("Set-Cookie", "a=1")
        resp.headers.add("Set-Cookie", "b=2")
        resp.headers["Retry-After"] = "7"
        return resp

    async with serve(handler) as base, httpx.AsyncClient(transport=AiohttpTransport()) as client:
        r = await client.post(f"{base}/v1/chat?x=1&y=%C3%A9", json={"q": "héllo"},
                              headers={"Authorization": "Bearer k", "X-Custom": "v"})
    assert r.status_code == 201 and r.json() == {"ok": True}
    assert r.headers.get_list("set-cookie") == ["a=1", "b=2"] and r.headers["retry-after"] == "7"
    assert seen["method"] == "POST" and seen["path"] == "/v1/chat?x=1&y=%C3%A9"
    assert json.loads(seen["body"]) == {"q": "héllo"}  # type: ignore[arg-type]
    headers = seen["headers"]
    assert isinstance(headers, CIMultiDict)
    assert headers["Authorization"] == "Bearer k" and headers["X-Custom"] == "v"
    assert headers["User-Agent"].startswith("python-httpx/")  # httpx's headers, not aiohttp's
    assert headers["Content-Type"] == "application/json"


async def test_compressed_bodies_are_decoded_once_by_httpx() -> None:
    payload = json.dumps({"text": "x" * 5000}).encode()

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(payload),
                            headers={"Content-Encoding": "gzip", "Content-Type": "application/json"})

    async with serve(handler) as base, httpx.AsyncClient(transport=AiohttpTransport()) as client:
        r = await client.get(base)
    assert r.json() == {"text": "x" * 5000}


async def test_a_closed_port_is_a_connect_error() -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response()

    async with serve(handler) as base:
        pass  # the server is gone: its port is closed now
    async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(base)


async def test_a_silent_server_is_a_read_timeout() -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response()

    async with serve(handler) as base:
        async with httpx.AsyncClient(transport=AiohttpTransport(), timeout=httpx.Timeout(5, read=0.3)) as client:
            with pytest.raises(httpx.ReadTimeout):
                await client.get(base)
        release.set()


async def test_a_connection_dropped_mid_response_is_a_transport_error() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Length": "1000"})
        await resp.prepare(request)
        await resp.write(b"partial")
        assert request.transport is not None
        request.transport.close()
        return resp

    async with serve(handler) as base, httpx.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.TransportError):
            await client.get(base)


async def test_a_body_is_streamed_and_a_reader_that_stops_early_drops_the_connection() -> None:
    # 128 MB: a transport that read the whole body before handing it over would see it all sent.
    dropped, sent_all = asyncio.Event(), []

    async def handler(request: web.Request) -> web.StreamResponse:
        if request.path != "/endless":
            return web.Response(text="pong")
        resp = web.StreamResponse()
        await resp.prepare(request)
        try:
            for _ in range(2048):
                await resp.write(b"x" * 65536)
            sent_all.append(True)
        finally:
            dropped.set()
        return resp

    async with serve(handler) as base, httpx.AsyncClient(transport=AiohttpTransport()) as client:
        async with client.stream("GET", f"{base}/endless") as response:
            received = 0
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if received >= 2**20:
                    break
        await asyncio.wait_for(dropped.wait(), 30)
        assert not sent_all
        assert (await client.get(f"{base}/ping")).text == "pong"  # the pool holds no half-read connection


async def test_the_transport_reopens_after_its_client_closed_it() -> None:
    # An httpx client closes its transport; a client built again around it must still work.
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="pong")

    transport = AiohttpTransport()
    async with serve(handler) as base:
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get(base)).text == "pong"
        async with httpx.AsyncClient(transport=transport) as client:
            assert (await client.get(base)).text == "pong"


async def test_proxy_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    proxied: list[str] = []

    async def proxy(request: web.Request) -> web.Response:
        proxied.append(str(request.url))  # an absolute-form target: the proxy sees the full URL
        return web.Response(text="via proxy")

    async def origin(request: web.Request) -> web.Response:
        return web.Response(text="direct")

    async with serve(proxy) as proxy_url, serve(origin) as origin_url:
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
            assert (await client.get(f"{origin_url}/a")).text == "via proxy"
        assert proxied == [f"{origin_url}/a"]

        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        async with httpx.AsyncClient(transport=AiohttpTransport()) as client:
            assert (await client.get(f"{origin_url}/b")).text == "direct"
        monkeypatch.delenv("NO_PROXY")
        async with httpx.AsyncClient(transport=AiohttpTransport(trust_env=False)) as client:
            assert (await client.get(f"{origin_url}/c")).text == "direct"
    assert len(proxied) == 1


async def test_max_connections_caps_the_pool() -> None:
    ports: set[int] = set()
    two_in = asyncio.Event()

    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        ports.add(request.transport.get_extra_info("peername")[1])
        if len(ports) >= 2:
            two_in.set()
        await two_in.wait()  # hold both connections until two are open, so a third would be needed
        return web.Response(text="ok")

    async with serve(handler) as base, httpx.AsyncClient(transport=AiohttpTransport(max_connections=2)) as client:
        await asyncio.gather(*(client.get(base) for _ in range(6)))
    assert len(ports) == 2


# httpx-aiohttp 0.2.0's transport fails these (bench/README.md, "Transport"), as it fails
# the closed-port, reopen and proxy tests above.


async def test_a_server_that_hangs_up_without_answering_is_a_protocol_error() -> None:
    # Not a connect timeout: the model client would then report "no connection within 10s"
    # about a server that did accept the connection.
    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        request.transport.close()
        return web.Response()

    async with serve(handler) as base, httpx.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.RemoteProtocolError):
            await client.get(base)


async def test_a_reset_connection_is_a_network_error() -> None:
    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        sock = request.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with an RST
        request.transport.close()
        return web.Response()

    async with serve(handler) as base, httpx.AsyncClient(transport=AiohttpTransport()) as client:
        with pytest.raises(httpx.NetworkError):
            await client.get(base)


async def test_the_transport_keeps_no_cookies_and_adds_no_headers() -> None:
    seen: list[CIMultiDict[str]] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.copy())
        resp = web.Response(text="ok")
        resp.set_cookie("sid", "abc")
        return resp

    async with serve(handler) as base, httpx.AsyncClient(transport=AiohttpTransport()) as client:
        # By name: aiohttp's own cookie jar would ignore cookies from an IP address.
        url = base.replace("127.0.0.1", "localhost")
        await client.get(url)
        client.cookies.clear()
        await client.post(url, content=b"raw bytes")
    assert "Cookie" not in seen[1]  # httpx forgot the cookie, so nobody sends it
    assert "Content-Type" not in seen[1]  # httpx sets none for raw bytes

