"""The remote-download guard against real servers on loopback: by default every one of them is
refused (they are this machine), whether named by address, by name, or by a redirect; a test that
allows 127.0.0.1 (the guard's test-only ``allow_networks``) shows the same server is fetched
then, so each refusal is the guard's and not a failed connection."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from ipaddress import ip_address, ip_network

import pytest
from aiohttp import web

from adapters._ssrf import Network, RemoteRefusedError, address_refusal, fetch_public
from adapters.base import MediaTooLargeError, MediaUnavailableError

WAIT = 30.0
LOCAL = (ip_network("127.0.0.1/32"),)
BODY = bytes(range(256)) * 800  # 200 KiB: several chunks

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Server:
    """A real HTTP server on ``host``; ``hits`` counts the requests that reached it."""

    def __init__(self, host: str, port: int, url: str) -> None:
        self.host, self.port, self.url = host, port, url
        self.hits: list[str] = []


@contextlib.asynccontextmanager
async def server(host: str, routes: dict[str, Handler]) -> AsyncIterator[Server]:
    app = web.Application()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    holder: list[Server] = []

    def counted(handler: Handler) -> Handler:
        async def run(request: web.Request) -> web.StreamResponse:
            holder[0].hits.append(request.path_qs)
            return await handler(request)
        return run

    for path, handler in routes.items():
        app.router.add_get(path, counted(handler))
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    port = runner.addresses[0][1]
    shown = f"[{host}]" if ":" in host else host
    holder.append(Server(host, port, f"http://{shown}:{port}"))
    try:
        yield holder[0]
    finally:
        await runner.cleanup()


async def body(_: web.Request) -> web.StreamResponse:
    return web.Response(body=BODY, content_type="image/png")


async def fetch(url: str, *, limit: int = 1 << 20, allow: Sequence[Network] = (), time_cap: float = WAIT,
                max_redirects: int = 3) -> bytes:
    got = b""
    async with asyncio.timeout(WAIT):
        async for chunk in fetch_public(url, limit=limit, time_cap=time_cap, allow_networks=allow,
                                        max_redirects=max_redirects):
            got += chunk
    return got


# ------------------------------------------------------------------ which addresses


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fd12::1", "private"),
    ("169.254.169.254", "cloud metadata"), ("fd00:ec2::254", "cloud metadata"), ("169.254.1.1", "link-local"),
    ("fe80::1", "link-local"), ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"), ("100.64.0.1", "reserved"), ("240.0.0.1", "private"),
    # An IPv4 address inside an IPv6 one reaches that IPv4 host: mapped, 6to4, NAT64.
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"), ("2002:7f00:1::", "loopback"),
    ("64:ff9b::a00:1", "private"),
])
def test_addresses_that_are_not_public_are_refused(address: str, reason: str) -> None:
    refusal = address_refusal(ip_address(address))
    assert refusal is not None and reason in refusal


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ip_address(address)) is None


def test_allowed_networks_pass_but_never_the_metadata_address() -> None:
    assert address_refusal(ip_address("127.0.0.1"), LOCAL) is None
    assert address_refusal(ip_address("127.0.0.2"), LOCAL) == "a loopback address"
    assert address_refusal(ip_address("169.254.169.254"), (ip_network("169.254.0.0/16"),)) == "a cloud metadata address"


# ------------------------------------------------------------------ real servers


async def test_an_allowed_server_is_fetched_whole() -> None:
    async with server("127.0.0.1", {"/img": body}) as srv:
        assert await fetch(f"{srv.url}/img", allow=LOCAL) == BODY
        # The same through the resolver: the name's one address is allowed.
        assert await fetch(f"http://localhost:{srv.port}/img", allow=LOCAL) == BODY
        assert len(srv.hits) == 2


async def test_loopback_by_address_or_by_name_is_refused_and_never_reached() -> None:
    async with server("127.0.0.1", {"/img": body}) as v4, server("::1", {"/img": body}) as v6:
        for url, reason in [(f"{v4.url}/img", "127.0.0.1 is a loopback address"),
                            (f"http://localhost:{v4.port}/img", "localhost resolves to a loopback address"),
                            (f"{v6.url}/img", "::1 is a loopback address"),
                            (f"http://[::ffff:127.0.0.1]:{v4.port}/img", "is a loopback address")]:
            with pytest.raises(RemoteRefusedError) as err:
                await fetch(url)
            assert reason in str(err.value)
        assert v4.hits == [] and v6.hits == []


@pytest.mark.parametrize(("url", "reason"), [
    ("http://10.1.2.3/x", "10.1.2.3 is a private address"),
    ("http://169.254.169.254/latest/meta-data/iam/security-credentials/", "is a cloud metadata address"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "is a cloud metadata address"),
    ("http://0.0.0.0:1/", "0.0.0.0 is an unspecified address"),
    ("file:///etc/passwd", "only http and https"),
    ("ftp://example.com/a.png", "only http and https"),
    ("gopher://127.0.0.1:25/", "only http and https"),
    ("http:///nohost", "no host"),
])
async def test_refused_urls_name_why(url: str, reason: str) -> None:
    with pytest.raises(RemoteRefusedError) as err:
        await fetch(url)
    assert reason in str(err.value)


async def test_a_redirect_to_loopback_is_refused_and_never_followed() -> None:
    async with server("127.0.0.2", {"/secret": body}) as inner:
        async def to_inner(_: web.Request) -> web.StreamResponse:
            raise web.HTTPFound(f"{inner.url}/secret")

        async def to_metadata(_: web.Request) -> web.StreamResponse:
            raise web.HTTPTemporaryRedirect("http://169.254.169.254/latest/meta-data/")

        async def to_file(_: web.Request) -> web.StreamResponse:
            raise web.HTTPMovedPermanently("file:///etc/passwd")

        async with server("127.0.0.1", {"/in": to_inner, "/meta": to_metadata, "/file": to_file}) as outer:
            for path, reason in [("/in", "127.0.0.2 is a loopback address"), ("/meta", "cloud metadata"),
                                 ("/file", "only http and https")]:
                with pytest.raises(RemoteRefusedError) as err:
                    await fetch(f"{outer.url}{path}", allow=LOCAL)
                assert reason in str(err.value)
            assert inner.hits == []
            # Allowed, the same redirect is followed: the refusal above was the guard's.
            assert await fetch(f"{outer.url}/in", allow=(ip_network("127.0.0.0/8"),)) == BODY
            assert inner.hits == ["/secret"]


async def test_at_most_three_redirects_are_followed() -> None:
    async def hop(request: web.Request) -> web.StreamResponse:
        n = int(request.match_info.get("n", "0"))
        raise web.HTTPFound(f"/hop/{n - 1}" if n > 0 else "/img")

    app_routes: dict[str, Handler] = {"/hop/{n}": hop, "/img": body}
    async with server("127.0.0.1", app_routes) as srv:
        assert await fetch(f"{srv.url}/hop/2", allow=LOCAL) == BODY  # hop/2, hop/1, hop/0: 3 redirects
        with pytest.raises(MediaUnavailableError) as err:
            await fetch(f"{srv.url}/hop/3", allow=LOCAL)
        assert "redirected more than 3 times" in str(err.value)
        assert srv.hits[-4:] == ["/hop/3", "/hop/2", "/hop/1", "/hop/0"]  # /img never asked


async def test_a_declared_size_over_the_limit_is_refused_before_the_body_is_read() -> None:
    never = asyncio.Event()

    async def huge(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "image/png"})
        resp.content_length = 50_000_000
        await resp.prepare(request)
        await resp.write(b"\x89PNG")
        await never.wait()  # the rest never comes: reading it would hang until the time cap
        return resp

    async with server("127.0.0.1", {"/huge": huge}) as srv:
        with pytest.raises(MediaTooLargeError) as err:
            await fetch(f"{srv.url}/huge", limit=1_000_000, allow=LOCAL)
        assert (err.value.size, err.value.limit) == (50_000_000, 1_000_000)
        never.set()


async def test_an_undeclared_body_is_counted_and_cut_at_the_limit() -> None:
    async def chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for _ in range(100):
            await resp.write(b"x" * 10_000)
        await resp.write_eof()
        return resp

    async with server("127.0.0.1", {"/c": chunked}) as srv:
        got = b""
        with pytest.raises(MediaTooLargeError) as err:
            async for chunk in fetch_public(f"{srv.url}/c", limit=100_000, time_cap=WAIT, allow_networks=LOCAL):
                got += chunk
        assert err.value.limit == 100_000 and len(got) <= 100_000


async def test_a_server_that_never_answers_is_given_up_at_the_time_cap() -> None:
    never = asyncio.Event()

    async def silent(_: web.Request) -> web.StreamResponse:
        await never.wait()
        return web.Response()

    async with server("127.0.0.1", {"/slow": silent}) as srv:
        with pytest.raises(MediaUnavailableError) as err:
            await fetch(f"{srv.url}/slow", allow=LOCAL, time_cap=0.3)
        assert "took more than 0.3 s" in str(err.value)
        never.set()


async def test_an_error_status_is_unavailable_without_the_url_in_the_message() -> None:
    async def gone(_: web.Request) -> web.StreamResponse:
        return web.Response(status=404)

    async with server("127.0.0.1", {"/x": gone}) as srv:
        with pytest.raises(MediaUnavailableError) as err:
            await fetch(f"{srv.url}/x?X-Amz-Signature=s3cr3t", allow=LOCAL)
        assert "HTTP 404" in str(err.value) and "s3cr3t" not in str(err.value)


async def test_a_refused_connection_is_unavailable_without_the_url_in_the_message() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(MediaUnavailableError) as err:
        await fetch(f"http://127.0.0.1:{port}/a?token=s3cr3t", allow=LOCAL)
    assert not isinstance(err.value, RemoteRefusedError)
    assert "failed" in str(err.value) and "s3cr3t" not in str(err.value)
