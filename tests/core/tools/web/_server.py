"""A real HTTP server on 127.0.0.1 with the pages web_fetch and web_search meet: articles,
redirect chains, endless and lying bodies, a gzip bomb, a fake SearXNG."""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.typedefs import Handler

ARTICLE = """<!doctype html>
<html><head><meta charset="utf-8"><title>The Test &amp; Article</title>
<script>var secret = "do not show me";</script><style>body { color: red }</style></head>
<body><nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
<article>
<h1>Main heading</h1>
<p>This is the first paragraph of the article, with <a href="https://example.org/docs">a link to the docs</a>
and enough words for the extractor to take it as the main content of the page.</p>
<h2>Second heading</h2>
<p>Another paragraph that goes on for a while, so that trafilatura keeps it; it has a
<a href="/relative/path">relative link</a> that should come back absolute.</p>
<ul><li>first item</li><li>second item</li></ul>
</article>
<footer>Copyright nobody</footer>
</body></html>
"""
# Enough to sniff as a PDF; web_fetch never shows it.
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n" + b"\x00\x01binary" * 2000
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + b"\x00" * 5000
CHUNK = b"A" * 65536


@dataclass
class WebServer:
    port: int = 0
    hits: list[str] = field(default_factory=list)
    #: what the SearXNG endpoint was asked (its query string)
    searches: list[dict[str, str]] = field(default_factory=list)
    #: the headers of those requests
    search_headers: list[dict[str, str]] = field(default_factory=list)
    #: bytes the endless handlers managed to write before the client went away
    written: dict[str, int] = field(default_factory=dict)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"


def _app(server: WebServer) -> web.Application:
    routes = web.RouteTableDef()

    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        server.hits.append(request.path)
        return await handler(request)

    @routes.get("/page")
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=ARTICLE, content_type="text/html")

    @routes.get("/latin1")
    async def latin1(request: web.Request) -> web.Response:
        body = "<html><body><p>Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, served in Z\u00fcrich.</p></body></html>"
        return web.Response(body=body.encode("latin-1"), headers={"Content-Type": "text/html; charset=iso-8859-1"})

    @routes.get("/no-article")
    async def no_article(request: web.Request) -> web.Response:
        body = ("<html><head><title>Form</title></head><body><form><input></form>"
                "<footer>Copyright <b>2024</b> Someone</footer></body></html>")
        return web.Response(text=body, content_type="text/html")

    @routes.get("/hostile")
    async def hostile(request: web.Request) -> web.Response:
        # 900 KB that takes the standard library's HTMLParser hours
        return web.Response(text="<html><body>" + "<a " * 300_000, content_type="text/html")

    @routes.get("/text")
    async def text(request: web.Request) -> web.Response:
        return web.Response(text="line one\nline two\n", content_type="text/plain")

    @routes.get("/json")
    async def as_json(request: web.Request) -> web.Response:
        return web.json_response({"name": "hermes", "items": [1, 2, 3]})

    @routes.get("/long-text")
    async def long_text(request: web.Request) -> web.Response:
        return web.Response(text="word " * 20_000, content_type="text/plain")

    @routes.get("/redirect/{n}")
    async def redirect(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        raise web.HTTPFound("/page" if n <= 1 else f"/redirect/{n - 1}")

    @routes.get("/redirect-to")
    async def redirect_to(request: web.Request) -> web.Response:
        raise web.HTTPFound(request.query["target"])

    @routes.get("/status/{code}")
    async def status(request: web.Request) -> web.Response:
        return web.Response(status=int(request.match_info["code"]), text="no")

    @routes.get("/pdf")
    async def pdf(request: web.Request) -> web.Response:
        return web.Response(body=PDF, content_type="application/pdf")

    @routes.get("/pdf-as-html")
    async def pdf_as_html(request: web.Request) -> web.Response:
        return web.Response(body=PDF, content_type="text/html")

    @routes.get("/octet")
    async def octet(request: web.Request) -> web.Response:
        return web.Response(body=PNG, content_type="application/octet-stream")

    @routes.get("/script")
    async def script(request: web.Request) -> web.Response:
        return web.Response(text="import os\nprint(os.getcwd())\n", content_type="application/x-python")

    @routes.get("/huge-pdf")
    async def huge_pdf(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/pdf"})
        response.content_length = 2**30
        return await _stream(request, "huge-pdf", response, PDF[:65536], limit=2**30)

    @routes.get("/untyped-html")
    async def untyped_html(request: web.Request) -> web.Response:
        return web.Response(body=ARTICLE.encode(), headers={"Content-Type": "application/octet-stream"})

    async def _stream(request: web.Request, name: str, response: web.StreamResponse, chunk: bytes,
                      limit: int = 2**31) -> web.StreamResponse:
        """Writes ``chunk`` until the client goes away (or ``limit`` bytes: never, in a test)."""
        await response.prepare(request)
        server.written[name] = 0
        try:
            while server.written[name] < limit:
                await response.write(chunk)
                server.written[name] += len(chunk)
        except (ConnectionError, RuntimeError):
            pass  # the client stopped reading: that is the point
        return response

    @routes.get("/endless")
    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.enable_chunked_encoding()
        return await _stream(request, "endless", response, b"<p>" + CHUNK + b"</p>")

    @routes.get("/declared-huge")
    async def declared_huge(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/html"})
        response.content_length = 2**30
        return await _stream(request, "declared-huge", response, CHUNK, limit=2**30)

    @routes.get("/gzip-bomb")
    async def gzip_bomb(request: web.Request) -> web.StreamResponse:
        # Endless zeros, gzipped: each 1 MB becomes about 1 KB on the wire.
        response = web.StreamResponse(headers={"Content-Type": "text/plain", "Content-Encoding": "gzip"})
        response.enable_chunked_encoding()
        squeeze = zlib.compressobj(6, zlib.DEFLATED, 31)
        await response.prepare(request)
        server.written["gzip-bomb"] = 0
        zeros = b"0" * 2**20
        try:
            while server.written["gzip-bomb"] < 2**34:
                data = squeeze.compress(zeros) + squeeze.flush(zlib.Z_SYNC_FLUSH)
                await response.write(data)
                server.written["gzip-bomb"] += len(zeros)
                # A write this small never waits for the socket: without this the handler would
                # starve the client it shares the event loop with.
                await asyncio.sleep(0)
        except (ConnectionError, RuntimeError):
            pass
        return response

    @routes.get("/trickle")
    async def trickle(request: web.Request) -> web.StreamResponse:
        # 20 KB at once, then a byte now and then, for ever: a slow site
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        try:
            await response.write(b"first part " * 2000)
            while not server.release.is_set():
                await asyncio.sleep(0.1)
                await response.write(b".")
        except (ConnectionError, RuntimeError):
            pass
        return response

    @routes.get("/slow")
    async def slow(request: web.Request) -> web.Response:
        await server.release.wait()
        return web.Response(text="too late")

    @routes.get("/set-cookie")
    async def set_cookie(request: web.Request) -> web.Response:
        response = web.HTTPFound("/echo-cookie")
        response.set_cookie("session", "s3cret")
        raise response

    @routes.get("/echo-cookie")
    async def echo_cookie(request: web.Request) -> web.Response:
        return web.Response(text=f"cookie header: {request.headers.get('Cookie', 'none')}", content_type="text/plain")

    @routes.get("/searx/search")
    async def search(request: web.Request) -> web.Response:
        server.searches.append(dict(request.query))
        server.search_headers.append(dict(request.headers))
        if request.query.get("format") != "json":
            return web.Response(status=400)
        if request.query["q"] == "nothing":
            return web.json_response({"results": [], "unresponsive_engines": [["google", "timeout"]]})
        results = [{"title": f"Result {i}", "url": f"https://example.org/{i}",
                    "content": f"Snippet  number\n{i}.", "engine": "duckduckgo"} for i in range(1, 31)]
        return web.json_response({"query": request.query["q"], "results": results,
                                  "answers": ["forty-two"], "unresponsive_engines": []})

    @routes.get("/noformat/search")
    async def search_forbidden(request: web.Request) -> web.Response:
        return web.Response(status=403, text="Forbidden")

    @routes.get("/notsearx/search")
    async def not_searx(request: web.Request) -> web.Response:
        return web.Response(text="<html>hello</html>", content_type="text/html")

    @routes.get("/wrongshape/search")
    async def wrong_shape(request: web.Request) -> web.Response:
        return web.Response(text=json.dumps(["a", "b"]), content_type="application/json")

    app = web.Application(middlewares=[record])
    app.add_routes(routes)
    return app


@asynccontextmanager
async def serve() -> AsyncIterator[WebServer]:
    server = WebServer()
    runner = web.AppRunner(_app(server), shutdown_timeout=1.0, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        server.release.set()
        await runner.cleanup()


@asynccontextmanager
async def silent_listener() -> AsyncIterator[tuple[int, list[int]]]:
    """A socket that accepts and never answers; the list counts the connections it got."""
    accepted: list[int] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        try:
            await reader.read()  # until the client gives up
        finally:
            writer.close()

    listener = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield port, accepted
    finally:
        listener.close()
        await listener.wait_closed()
