"""The SSRF guard: which addresses web_fetch refuses, in every spelling, before any connection."""

from __future__ import annotations

import asyncio
from ipaddress import IPv4Address, ip_address

import pytest
from yarl import URL

from core.tools import ToolContext, ToolOutcome, ToolRegistry
from core.tools.web import UrlRefusedError, WebSettings, address_refusal, web_tools
from core.tools.web._guard import GuardedResolver, check_url, refusal

from ._server import WebServer, silent_listener

DEFAULT = WebSettings()


async def _fetch(url: str, ctx: ToolContext, settings: WebSettings = DEFAULT) -> str:
    return await web_tools(settings)[0].handler({"url": url}, ctx)


@pytest.mark.parametrize(("address", "reason"), [
    ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fc00::1", "private"),
    ("fd12:3456::1", "private"), ("fec0::1", "private"),
    ("169.254.1.1", "link-local"), ("fe80::1", "link-local"),
    ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"), ("100.100.100.200", "metadata"),
    ("169.254.170.2", "metadata"),
    ("100.64.0.1", "CGNAT"), ("100.127.255.254", "CGNAT"),
    ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"), ("192.0.2.1", "private"),
    ("198.18.0.1", "private"),
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "metadata"), ("::ffff:10.0.0.1", "private"),
    ("2002:7f00:1::", "loopback"),  # 6to4 of 127.0.0.1
    ("64:ff9b::a9fe:a9fe", "metadata"),  # NAT64 of 169.254.169.254
])
def test_non_public_addresses_are_refused(address: str, reason: str) -> None:
    found = address_refusal(ip_address(address))
    assert found is not None and reason in found


@pytest.mark.parametrize("address", ["93.184.215.14", "8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8"])
def test_public_addresses_pass(address: str) -> None:
    assert address_refusal(ip_address(address)) is None


def test_allow_private_opens_everything_but_the_metadata_addresses() -> None:
    open_ = WebSettings(allow_private=True)
    assert refusal(ip_address("127.0.0.1"), open_) is None
    assert refusal(ip_address("10.0.0.1"), open_) is None
    for metadata in ("169.254.169.254", "::ffff:169.254.169.254", "fd00:ec2::254", "100.100.100.200"):
        assert refusal(ip_address(metadata), open_) == "a cloud metadata address"


def test_the_test_seam_replaces_the_check_but_not_for_metadata() -> None:
    seam = WebSettings(forbidden=lambda ip: ip == IPv4Address("127.0.0.2"))
    assert refusal(ip_address("127.0.0.1"), seam) is None
    assert refusal(ip_address("127.0.0.2"), seam) == "a forbidden address"
    assert refusal(ip_address("169.254.169.254"), seam) == "a cloud metadata address"


@pytest.mark.parametrize("host", [
    "127.0.0.1", "[::1]", "2130706433", "0x7f000001", "0x7f.1", "017700000001", "0177.0.0.1", "127.1",
    "0", "0x0", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "169.254.169.254", "2852039166", "0xa9fea9fe",
    "[fe80::1%25eth0]", "10.0.0.1", "100.64.0.1", "１２７.０.０.１", "127.000.000.001", "0x7f.0x0.0x0.0x1",
])
def test_literal_addresses_in_every_spelling_are_refused_without_dns(host: str) -> None:
    with pytest.raises(UrlRefusedError, match="only reads public addresses"):
        check_url(URL(f"http://{host}/x"), DEFAULT)


@pytest.mark.parametrize("url", ["http://example.org/", "https://8.8.8.8/", "http://1e100.net/", "http://0day.com/",
                                 "http://127%2e0%2e0%2e1/"])  # not an address: the resolver has the last word
def test_public_literals_and_names_pass_the_url_check(url: str) -> None:
    assert check_url(URL(url), DEFAULT)  # a name is checked later, by the resolver


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://example.org/file", "'ftp:'"), ("file:///etc/passwd", "'file:'"), ("gopher://x/", "'gopher:'"),
    ("javascript:alert(1)", "'javascript:'"), ("//example.org/", "without a scheme"), ("example.org", "without a scheme"),
    ("http://user:pw@example.org/", "user name or password"), ("http://evil.com@10.0.0.1/", "user name"),
    ("http:///nohost", "no host"),
])
def test_urls_that_are_not_plain_http_are_refused(url: str, message: str) -> None:
    with pytest.raises(UrlRefusedError, match=message):
        check_url(URL(url), DEFAULT)


@pytest.mark.parametrize("host", ["127.0.0.1", "2130706433", "0x7f000001", "0x7f.1", "localhost", "[::ffff:127.0.0.1]"])
async def test_loopback_is_refused_without_connecting(host: str, ctx: ToolContext) -> None:
    async with silent_listener() as (port, accepted):
        with pytest.raises(UrlRefusedError) as caught:
            await _fetch(f"http://{host}:{port}/secret?token=abc123", ctx)
        assert accepted == []
    message = str(caught.value)
    assert "loopback" in message and "abc123" not in message


async def test_a_name_is_checked_by_the_resolver_the_connection_uses() -> None:
    # localhost is a name (in /etc/hosts): only the resolver can see that it is 127.0.0.1.
    guarded, opened = GuardedResolver(DEFAULT), GuardedResolver(WebSettings(allow_private=True))
    try:
        with pytest.raises(UrlRefusedError, match=r"localhost resolves to a loopback address"):
            await guarded.resolve("localhost", 80)
        assert any(r["host"] == "127.0.0.1" for r in await opened.resolve("localhost", 80))
    finally:
        await guarded.close()
        await opened.close()


@pytest.mark.parametrize("host", ["2130706433", "0x7f.1", "017700000001", "127.1", "0x7f000001"])
async def test_the_resolver_reads_numeric_hosts_as_addresses_and_refuses_them_too(host: str) -> None:
    # Behind check_url, should a spelling ever slip past it: getaddrinfo reads these without DNS.
    resolver = GuardedResolver(DEFAULT)
    try:
        with pytest.raises(UrlRefusedError, match=r"resolves to a loopback address \(127\.0\.0\.1\)"):
            await resolver.resolve(host, 80)
    finally:
        await resolver.close()


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/iam/security-credentials/", "http://[::1]/", "http://0x7f000001/",
    "http://2130706433/", "http://localhost/", "http://[fd00:ec2::254]/", "http://100.100.100.200/",
    "ftp://example.org/", "file:///etc/passwd",
])
async def test_bad_urls_give_the_model_a_clear_refusal(url: str, ctx: ToolContext) -> None:
    outcome = await _registry_call(url, ctx)
    assert not outcome.ok
    assert outcome.content.startswith("Error: ")
    assert "public addresses" in outcome.content or "http and https" in outcome.content


async def _registry_call(url: str, ctx: ToolContext, settings: WebSettings = DEFAULT) -> ToolOutcome:
    return await ToolRegistry(web_tools(settings)).dispatch("web_fetch", {"url": url}, ctx)


async def test_metadata_is_refused_even_with_allow_private(ctx: ToolContext) -> None:
    with pytest.raises(UrlRefusedError, match="metadata"):
        await _fetch("http://169.254.169.254/latest/meta-data/", ctx, WebSettings(allow_private=True))


async def test_a_redirect_to_a_forbidden_address_is_refused(server: WebServer, ctx: ToolContext) -> None:
    seam = WebSettings(forbidden=lambda ip: ip == IPv4Address("127.0.0.2"))
    target = f"http://127.0.0.2:{server.port}/page"
    with pytest.raises(UrlRefusedError, match=r"127\.0\.0\.2 is a forbidden address"):
        await _fetch(server.url(f"/redirect-to?target={target}"), ctx, seam)
    assert server.hits == ["/redirect-to"]  # the target was never asked
    # The same chain with the target allowed is followed (the refusal was the seam's doing).
    result = await _fetch(server.url(f"/redirect-to?target={server.url('/page')}"), ctx, seam)
    assert "Main heading" in result


async def test_a_redirect_chain_ending_on_loopback_is_refused(server: WebServer, ctx: ToolContext) -> None:
    seam = WebSettings(forbidden=lambda ip: ip == IPv4Address("127.0.0.2"))
    hop2 = server.url(f"/redirect-to?target=http://2130706434:{server.port}/page")  # 127.0.0.2, as a number
    with pytest.raises(UrlRefusedError, match="forbidden"):
        await _fetch(server.url(f"/redirect-to?target={hop2}"), ctx, seam)
    assert server.hits == ["/redirect-to", "/redirect-to"]


async def test_a_redirect_to_another_scheme_is_refused(server: WebServer, ctx: ToolContext) -> None:
    with pytest.raises(UrlRefusedError, match="'file:'"):
        await _fetch(server.url("/redirect-to?target=file:///etc/passwd"), ctx, WebSettings(allow_private=True))


async def test_refusals_do_not_stop_the_next_fetch(server: WebServer, ctx: ToolContext) -> None:
    open_ = WebSettings(allow_private=True)
    bad = [_fetch(u, ctx) for u in ("http://169.254.169.254/", "http://0x7f.1/", "file:///etc/passwd")]
    results = await asyncio.gather(*bad, _fetch(server.url("/page"), ctx, open_), return_exceptions=True)
    assert all(isinstance(r, UrlRefusedError) for r in results[:3])
    assert isinstance(results[3], str) and "Main heading" in results[3]
