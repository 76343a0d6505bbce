"""Bodies made readable: the type decided, the charset found, HTML made text in linear time."""

from __future__ import annotations

import codecs
import time

import pytest

from core.tools import ToolContext
from core.tools.web import WebSettings, _render, web_tools
from core.tools.web._content import declared_kind, decode_text, sniffed_kind
from core.tools.web._plain import crude_text, html_title, plain_text, strip_invisible

from ._server import ARTICLE, PDF, PNG, WebServer


@pytest.mark.parametrize(("mime", "kind"), [
    ("text/html", "html"), ("application/xhtml+xml", "html"), ("text/plain", "text"), ("text/markdown", "text"),
    ("application/json", "text"), ("application/ld+json", "text"), ("application/vnd.api+json", "text"),
    ("application/rss+xml", "text"), ("image/svg+xml", "text"), ("image/png", "binary"), ("video/mp4", "binary"),
    ("font/woff2", "binary"), ("application/pdf", None), ("application/zip", None), ("application/x-python", None),
    ("", None), ("application/octet-stream", None),
])
def test_the_declared_type_decides_first(mime: str, kind: str | None) -> None:
    assert declared_kind(mime) == kind


def test_the_first_bytes_overrule_a_text_type_and_decide_an_unknown_one() -> None:
    assert sniffed_kind("html", "text/html", PDF[:8192]) == ("binary", "application/pdf")
    assert sniffed_kind(None, "application/pdf", PDF[:8192]) == ("binary", "application/pdf")
    assert sniffed_kind(None, "application/octet-stream", PNG) == ("binary", "image/png")
    assert sniffed_kind(None, "application/vnd.ms-excel", bytes(range(256))) == ("binary", "application/vnd.ms-excel")
    assert sniffed_kind("text", "text/plain", b"plain words") == ("text", "text/plain")
    assert sniffed_kind(None, "", ARTICLE.encode()) == ("html", "text/html")
    assert sniffed_kind(None, "", b"\xef\xbb\xbf <!-- a --> <!-- b -->\n<HTML lang=en>") == ("html", "text/html")
    assert sniffed_kind(None, "", b"# A markdown note\n\n<html> is mentioned") == ("text", "text/plain")
    assert sniffed_kind(None, "application/x-python", b"import os\n") == ("text", "application/x-python")
    assert sniffed_kind(None, "", bytes(range(256)))[0] == "binary"


def test_comments_before_the_first_tag_cannot_make_the_check_slow() -> None:
    head = b"<!-- a -->" * 200 + b"<!--" * 100 + b"x"
    started = time.monotonic()
    assert sniffed_kind(None, "", head[:8192]) == ("text", "text/plain")
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize(("body", "charset", "kind", "text"), [
    ("Zürich".encode("latin-1"), "iso-8859-1", "text", "Zürich"),
    ('<meta charset="windows-1252"><p>caf\xe9</p>'.encode("cp1252"), None, "html", "café"),
    (b'<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">\xe9', None, "html", "é"),
    (codecs.BOM_UTF8 + "é".encode(), "latin-1", "text", "é"),  # the byte-order mark wins
    ("é".encode(), "no-such-charset", "text", "é"),
    (b"cut inside a character: \xc3", None, "text", "cut inside a character: \ufffd"),
])
def test_the_charset_is_found(body: bytes, charset: str | None, kind: str, text: str) -> None:
    assert text in decode_text(body, charset, kind)  # type: ignore[arg-type]


def test_scripts_styles_and_comments_are_dropped() -> None:
    page = ("<p>a</p><script>x<y</script ><STYLE>p{}</style><!-- hidden --><p>b</p>"
            "<svg><text>drawn</text></svg><p>c</p><script>never closed <p>d</p>")
    assert strip_invisible(page) == "<p>a</p><p>b</p><p>c</p>"


def test_the_title_is_read_once_and_short() -> None:
    assert html_title("<head><title lang=en>\n A &amp; B \n</title></head>") == "A & B"
    assert html_title("<p>no title</p>") is None
    assert html_title("<title>" + "x" * 5000) == "x" * 300


def test_plain_text_keeps_paragraphs_on_their_own_lines() -> None:
    page = "<html><head><title>T</title></head><body><h1>Head</h1><p>One <b>bold</b></p><ul><li>a</li><li>b</li></ul></body></html>"
    assert plain_text(page) == "Head\n\nOne bold\n\na\n\nb"
    assert crude_text("<p>One &amp; <b>two</b></p><p>three") == "One & two three"


@pytest.mark.parametrize("pattern", ["<a ", "<a b='", "</", "<x", "<?", "<!", "<div>", "<"])
def test_hostile_markup_is_read_in_linear_time(pattern: str) -> None:
    page = pattern * (300_000 // len(pattern))
    started = time.monotonic()
    strip_invisible(page), html_title(page), crude_text(page), plain_text(page)
    assert time.monotonic() - started < 5


async def test_a_page_without_an_article_gives_its_text(server: WebServer, ctx: ToolContext) -> None:
    result = await web_tools(WebSettings(allow_private=True))[0].handler({"url": server.url("/no-article")}, ctx)
    assert result.startswith("Title: Form\n")
    assert "Note: No article was found on the page; this is all of its text." in result
    assert result.endswith("\n\nCopyright 2024 Someone")


async def test_a_hostile_page_is_fetched_and_read_quickly(server: WebServer, ctx: ToolContext) -> None:
    started = time.monotonic()
    result = await web_tools(WebSettings(allow_private=True))[0].handler({"url": server.url("/hostile")}, ctx)
    assert time.monotonic() - started < 10
    assert result.startswith(f"URL: {server.url('/hostile')}")


async def test_an_extractor_failure_still_gives_the_text(server: WebServer, ctx: ToolContext,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing real makes trafilatura raise on demand: a stand-in that does.
    def broken(page: str, url: str) -> tuple[str, bool]:
        raise RuntimeError("a parser bug")

    monkeypatch.setattr(_render, "_readable", broken)
    result = await web_tools(WebSettings(allow_private=True))[0].handler({"url": server.url("/page")}, ctx)
    assert "Note: The page could not be laid out; this is its text without any layout." in result
    assert "Main heading" in result and "do not show me" not in result


async def test_a_slow_extraction_gives_the_text_in_time(server: WebServer, ctx: ToolContext,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(page: str, url: str) -> tuple[str, bool]:
        time.sleep(1.0)
        return "late", True

    monkeypatch.setattr(_render, "_readable", slow)
    started = time.monotonic()
    result = await web_tools(WebSettings(allow_private=True, timeout=0.3))[0].handler(
        {"url": server.url("/page")}, ctx)
    assert time.monotonic() - started < 0.9
    assert "Note: Reading the page took too long; this is its text without any layout." in result
    assert "Main heading" in result and "late" not in result
