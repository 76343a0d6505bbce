"""web_fetch against a real server on 127.0.0.1: pages made markdown, caps, redirects, bad bodies."""

from __future__ import annotations

import time
import tracemalloc

import pytest
from structlog.testing import capture_logs

from core.tools import ToolContext, ToolError, ToolRegistry
from core.tools.web import HEADER_ROOM, UrlRefusedError, WebSettings, web_tools

from ._server import WebServer, silent_listener

OPEN = WebSettings(allow_private=True, timeout=10.0)


async def _fetch(url: str, ctx: ToolContext, settings: WebSettings = OPEN, **args: object) -> str:
    return await web_tools(settings)[0].handler({"url": url, **args}, ctx)


async def test_a_page_becomes_markdown_with_headings_and_links(server: WebServer, ctx: ToolContext) -> None:
    result = await _fetch(server.url("/page"), ctx)
    head, _, body = result.partition("\n\n")
    assert head.splitlines() == ["Title: The Test & Article", f"URL: {server.url('/page')}"]
    assert "# Main heading" in body and "## Second heading" in body
    assert "[a link to the docs](https://example.org/docs)" in body
    assert f"[relative link]({server.url('/relative/path')})" in body  # made absolute
    assert "- first item" in body
    assert "do not show me" not in result and "color: red" not in result  # scripts and styles
    assert "Copyright nobody" not in body  # boilerplate left out


async def test_the_page_charset_is_honoured(server: WebServer, ctx: ToolContext) -> None:
    assert "Café crème brûlée, served in Zürich." in await _fetch(server.url("/latin1"), ctx)


@pytest.mark.parametrize(("path", "expected"), [
    ("/text", "line one\nline two"), ("/json", '{"name": "hermes", "items": [1, 2, 3]}'),
])
async def test_text_and_json_come_back_as_they_are(server: WebServer, ctx: ToolContext, path: str,
                                                   expected: str) -> None:
    result = await _fetch(server.url(path), ctx)
    assert result.rstrip() == f"URL: {server.url(path)}\n\n{expected}"


async def test_a_script_served_as_an_application_type_is_read_as_text(server: WebServer, ctx: ToolContext) -> None:
    assert (await _fetch(server.url("/script"), ctx)).endswith("\n\nimport os\nprint(os.getcwd())\n")


async def test_html_without_a_declared_type_is_recognised(server: WebServer, ctx: ToolContext) -> None:
    assert "# Main heading" in await _fetch(server.url("/untyped-html"), ctx)


@pytest.mark.parametrize(("path", "what"), [
    ("/pdf", "a PDF document (application/pdf, "), ("/pdf-as-html", "a PDF document (application/pdf"),
    ("/octet", "an image (image/png"), ("/huge-pdf", "a PDF document (application/pdf, 1.0 GB)"),
])
async def test_files_are_described_not_dumped(server: WebServer, ctx: ToolContext, path: str, what: str) -> None:
    result = await _fetch(server.url(path), ctx)
    assert what in result and "not a web page" in result
    assert "%PDF" not in result and "binary" not in result
    if path == "/pdf":
        assert "KB)" in result  # its size, from Content-Length
    if path == "/huge-pdf":
        assert server.written["huge-pdf"] < 64 * 2**20  # only its first bytes were read


async def test_long_content_is_cut_at_max_chars_with_a_note(server: WebServer, ctx: ToolContext) -> None:
    result = await _fetch(server.url("/long-text"), ctx, max_chars=1000)
    content = result.partition("\n\n")[2]
    assert content.startswith("word word")
    assert "[Cut: the first 1,000 of 100,000 characters are shown. Call web_fetch again with a larger max_chars" in result
    assert len(result) < 1300
    whole = await _fetch(server.url("/long-text"), ctx)
    assert "[Cut: the first 20,000 of 100,000" in whole


async def test_max_chars_stays_under_the_result_cap_the_daemon_sets(server: WebServer, ctx: ToolContext) -> None:
    # agent.max_tool_result_kb: 8 -> the daemon gives web_fetch 8 KB less its header room
    settings = WebSettings(allow_private=True, max_chars=8 * 1024 - HEADER_ROOM)
    tool = web_tools(settings)[0]
    assert tool.parameters["properties"]["max_chars"]["maximum"] == 5192
    assert tool.max_result_chars == 8 * 1024 and "at most 5,192" in tool.description
    result = await tool.handler({"url": server.url("/long-text")}, ctx)
    assert "[Cut: the first 5,192 of 100,000 characters are shown.]" in result  # already the most
    assert len(result) <= 8 * 1024
    with pytest.raises(ToolError, match="'max_chars' must be between 500 and 5192"):
        await tool.handler({"url": server.url("/long-text"), "max_chars": 20_000}, ctx)


async def test_redirects_are_followed_up_to_five(server: WebServer, ctx: ToolContext) -> None:
    result = await _fetch(server.url("/redirect/5"), ctx)
    assert "(Reached after 5 redirects from the URL asked for.)" in result and "# Main heading" in result
    assert f"URL: {server.url('/page')}" in result


async def test_a_chain_of_ten_redirects_is_refused_at_the_cap(server: WebServer, ctx: ToolContext) -> None:
    with pytest.raises(UrlRefusedError, match="redirected more than 5 times"):
        await _fetch(server.url("/redirect/10"), ctx)
    assert len(server.hits) == 6


async def test_an_endless_response_is_cut_at_the_cap_quickly_in_bounded_memory(server: WebServer,
                                                                               ctx: ToolContext) -> None:
    cap = 2 * 2**20
    settings = WebSettings(allow_private=True, max_download_bytes=cap, timeout=30)
    tracemalloc.start()
    started = time.monotonic()
    try:
        result = await _fetch(server.url("/endless"), ctx, settings)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.monotonic() - started < 20
    assert "longer than web_fetch downloads (2.0 MB); only its first part was read" in result
    assert peak < 20 * cap  # the body, its text and the extractor's tree: not a gigabyte
    assert server.written["endless"] < 64 * cap  # the client stopped reading


async def test_a_declared_huge_response_is_refused_before_reading(server: WebServer, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"is 1\.0 GB, more than web_fetch reads \(5\.0 MB\)"):
        await _fetch(server.url("/declared-huge"), ctx)
    assert server.written.get("declared-huge", 0) < 16 * 2**20


async def test_a_gzip_bomb_is_cut_at_the_cap_on_decoded_bytes(server: WebServer, ctx: ToolContext) -> None:
    cap = 2**20
    settings = WebSettings(allow_private=True, max_download_bytes=cap, timeout=30)
    tracemalloc.start()
    try:
        result = await _fetch(server.url("/gzip-bomb"), ctx, settings, max_chars=500)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "longer than web_fetch downloads (1.0 MB)" in result
    assert "of 1,048,576 characters are shown" in result  # exactly the cap, decoded
    assert peak < 64 * cap


async def test_a_server_that_never_answers_times_out(ctx: ToolContext) -> None:
    async with silent_listener() as (port, accepted):
        started = time.monotonic()
        with pytest.raises(ToolError, match=r"did not answer in time \(web_fetch gives up after 0\.5 s\)"):
            await _fetch(f"http://127.0.0.1:{port}/", ctx, WebSettings(allow_private=True, timeout=0.5))
        assert time.monotonic() - started < 5
        assert accepted == [1]


async def test_a_body_still_arriving_at_the_time_cap_gives_its_first_part(server: WebServer,
                                                                         ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await _fetch(server.url("/trickle"), ctx, WebSettings(allow_private=True, timeout=1.0))
    assert time.monotonic() - started < 1.5
    assert "Note: The response was still arriving when web_fetch stopped waiting (1 s); only its first 21 KB" in result
    assert result.partition("\n\n")[2].startswith("first part first part")


async def test_a_slow_handler_times_out_too(server: WebServer, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="did not answer in time"):
        await _fetch(server.url("/slow"), ctx, WebSettings(allow_private=True, timeout=0.5))


@pytest.mark.parametrize(("code", "message"), [
    (404, "answered HTTP 404 Not Found (there is no page at this URL)."),
    (403, "answered HTTP 403 Forbidden (the site refuses this request"),
    (500, "answered HTTP 500 Internal Server Error (a server error"),
    (304, "answered HTTP 304 Not Modified."),
])
async def test_error_statuses_are_named(server: WebServer, ctx: ToolContext, code: int, message: str) -> None:
    with pytest.raises(ToolError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await _fetch(server.url(f"/status/{code}"), ctx)


async def test_connection_refused_is_clear(ctx: ToolContext) -> None:
    async with silent_listener() as (port, _):
        pass  # the port is closed again: nothing listens there now
    with pytest.raises(ToolError, match=r"^Could not connect to 127\.0\.0\.1: connection refused\.$"):
        await _fetch(f"http://127.0.0.1:{port}/", ctx)


async def test_cookies_are_not_carried_across_a_redirect(server: WebServer, ctx: ToolContext) -> None:
    assert "cookie header: none" in await _fetch(server.url("/set-cookie"), ctx)


async def test_nothing_of_the_url_but_its_host_is_logged(server: WebServer, ctx: ToolContext) -> None:
    with capture_logs() as logs:
        await _fetch(server.url("/page?token=s3cret-token"), ctx)
        with pytest.raises(ToolError):
            await _fetch(server.url("/status/404?token=s3cret-token"), ctx)
        with pytest.raises(ToolError):
            await _fetch("http://127.0.0.1:1/?token=s3cret-token", ctx, WebSettings())
    assert [e["event"] for e in logs] == ["web.fetched", "web.fetch_failed", "web.fetch_refused"]
    assert "s3cret-token" not in repr(logs)


async def test_failures_reach_the_model_as_results_through_the_registry(server: WebServer,
                                                                        ctx: ToolContext) -> None:
    registry = ToolRegistry(web_tools(OPEN))
    ok = await registry.dispatch("web_fetch", {"url": server.url("/page")}, ctx)
    assert ok.ok and "# Main heading" in ok.content
    failed = await registry.dispatch("web_fetch", {"url": server.url("/status/404")}, ctx)
    assert not failed.ok and failed.content.startswith("Error: 127.0.0.1 answered HTTP 404")
    invalid = await registry.dispatch("web_fetch", {"url": 5}, ctx)
    assert not invalid.ok and "url" in invalid.content
    garbage = await registry.dispatch("web_fetch", {"url": "http://[::1"}, ctx)
    assert not garbage.ok and garbage.content.startswith("Error: ")
