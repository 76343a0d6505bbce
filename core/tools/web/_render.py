"""A fetched body made readable for the model: HTML to markdown, text as it is, the rest described.

HTML goes through trafilatura (the article's text as markdown, headings, lists, tables and
links kept, relative links made absolute). It is imported on first use: it and lxml cost
about 25 MB and a quarter of a second, and most turns never fetch a page. It is also slow
and hungry on big pages (about 2 s and 90 MB per MB of HTML), so it runs on a thread of its
own, one page at a time, after scripts, styles and comments are dropped and the rest is cut
to ``_MAX_HTML_CHARS``; when it finds no article, or takes longer than the fetch's time cap,
the page's plain text is given instead.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from core.media import human_size

from ._content import decode_text
from ._http import Fetched
from ._plain import crude_text, html_title, plain_text, strip_invisible
from ._settings import WebSettings

__all__ = ["Page", "render"]

log = structlog.get_logger("hermes.tools.web")

#: the most HTML (scripts and styles already gone) handed to the extractor
_MAX_HTML_CHARS = 1_000_000
_LABELS = {"application/pdf": "a PDF document", "application/zip": "a zip archive"}
_FAMILIES = {"image": "an image", "audio": "an audio file", "video": "a video"}

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


@dataclass(frozen=True)
class Page:
    """What the model is shown of a fetched body."""

    title: str | None
    text: str
    #: what the model should know about how the text was made (cut, fallback)
    notes: tuple[str, ...] = ()


def _executor() -> ThreadPoolExecutor:
    """One thread for extractions: two big pages at once would double the memory peak, and the
    default executor (DNS lookups, file reads) stays free while a page is parsed."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hermes-web-extract")
        return _pool


def _readable(page: str, url: str) -> tuple[str, bool]:
    """The page as markdown, and True; or, when trafilatura finds no article, its plain text and False."""
    import trafilatura  # first use only: see the module's docstring

    # Its log lines are about the page ("empty HTML tree", "discarding data"), not the daemon;
    # web_fetch says itself when no article was found.
    logging.getLogger("trafilatura").setLevel(logging.CRITICAL)
    result = trafilatura.extract(page, url=url, output_format="markdown", include_links=True)
    if isinstance(result, str) and result.strip():
        return result, True
    return plain_text(page), False


async def _html(fetched: Fetched, settings: WebSettings) -> Page:
    source = decode_text(fetched.body, fetched.charset, "html")
    title = html_title(source)
    visible = strip_invisible(source)
    notes: list[str] = []
    if len(visible) > _MAX_HTML_CHARS:
        visible = visible[:_MAX_HTML_CHARS]
        notes.append(f"The page's HTML is very long; only its first {_MAX_HTML_CHARS:,} characters were read.")
    if not visible.strip():
        return Page(title, "(The page has no readable text.)", tuple(notes))
    loop = asyncio.get_running_loop()
    try:
        text, article = await asyncio.wait_for(
            loop.run_in_executor(_executor(), _readable, visible, fetched.url), settings.timeout)
    except TimeoutError:
        # The thread finishes on its own (its input is capped); this call does not wait for it.
        text, article = await asyncio.to_thread(crude_text, visible), False
        notes.append("Reading the page took too long; this is its text without any layout.")
    except Exception:
        # A parser's bug on one odd page must not cost the model the page: the crude text, and a trace.
        log.warning("web.extract_failed", exc_info=True)
        text, article = await asyncio.to_thread(crude_text, visible), False
        notes.append("The page could not be laid out; this is its text without any layout.")
    else:
        if not article:
            notes.append("No article was found on the page; this is all of its text.")
    return Page(title, text or "(The page has no readable text.)", tuple(notes))


def _describe(fetched: Fetched) -> Page:
    family = fetched.mime.partition("/")[0]
    what = _LABELS.get(fetched.mime) or _FAMILIES.get(family) or "a file"
    size = f", {human_size(fetched.size)}" if fetched.size is not None else ""
    return Page(None, f"This URL is {what} ({fetched.mime or 'type not given'}{size}), not a web page. "
                      "web_fetch reads web pages and text only, so its content is not shown.")


async def render(fetched: Fetched, settings: WebSettings) -> Page:
    if fetched.kind == "binary":
        return _describe(fetched)
    if fetched.kind == "html":
        page = await _html(fetched, settings)
    else:
        text = decode_text(fetched.body, fetched.charset, "text")
        page = Page(None, text if text.strip() else "(The response is empty.)")
    if fetched.cut == "size":
        note = (f"The response is longer than web_fetch downloads ({human_size(settings.max_download_bytes)}); "
                "only its first part was read.")
        page = Page(page.title, page.text, (note, *page.notes))
    elif fetched.cut == "time":
        note = (f"The response was still arriving when web_fetch stopped waiting ({settings.timeout:g} s); "
                f"only its first {human_size(len(fetched.body))} were read.")
        page = Page(page.title, page.text, (note, *page.notes))
    return page
