"""The ``web_fetch`` tool: a URL to readable markdown, within the guard and the caps."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._args import Args
from .._base import Tool, ToolContext
from ._http import fetch
from ._render import Page, render
from ._settings import WebSettings

__all__ = ["DEFAULT_MAX_CHARS", "HEADER_ROOM", "MAX_CHARS", "web_fetch_tool"]

DEFAULT_MAX_CHARS = 20_000
MAX_CHARS = 100_000
#: the fewest characters the model may ask for
_MIN_CHARS = 500
#: the lines above the content (title, URL, notes) and the cut note fit in this much besides max_chars
HEADER_ROOM = 3_000

_DESCRIPTION = (
    "Read a web page: fetch an http(s) URL and get its main content as markdown (headings, lists, "
    "tables and links kept; menus and ads left out). Plain text, JSON and markdown come back as they "
    "are; PDFs, images and other files are only described. Use it for a URL the user gave or a "
    "web_search result. Long pages are cut at 'max_chars' (default {default:,}, at most {most:,})."
)
_PRIVATE_NOTE = " Addresses on this machine or a private network are refused."


def _parameters(default: int, most: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "url": {"type": "string", "description": "The http:// or https:// URL to read."},
            "max_chars": {"type": "integer", "minimum": _MIN_CHARS, "maximum": most,
                          "description": f"Most characters of content to return (default {default:,})."},
        },
        "required": ["url"],
        "additionalProperties": False,
    }


def _format(page: Page, url: str, redirects: int, max_chars: int, most: int) -> str:
    lines: list[str] = []
    if page.title:
        lines.append(f"Title: {page.title}")
    lines.append(f"URL: {url}")
    if redirects:
        lines.append(f"(Reached after {redirects} redirect{'s' if redirects > 1 else ''} from the URL asked for.)")
    lines.extend(f"Note: {note}" for note in page.notes)
    text = page.text
    if len(text) > max_chars:
        more = ("" if max_chars >= most
                else f" Call web_fetch again with a larger max_chars (up to {most:,}) to read more.")
        text = (text[:max_chars].rstrip()
                + f"\n\n[Cut: the first {max_chars:,} of {len(page.text):,} characters are shown.{more}]")
    return "\n".join(lines) + "\n\n" + text


def web_fetch_tool(settings: WebSettings) -> Tool:
    """``web_fetch`` bound to ``settings``."""
    # A result longer than the registry lets through would be cut again, without our note.
    most = max(_MIN_CHARS, min(MAX_CHARS, settings.max_chars))
    default = min(DEFAULT_MAX_CHARS, most)

    async def _web_fetch(args: Mapping[str, Any], ctx: ToolContext) -> str:
        a = Args(args)
        url = a.required_text("url", max_chars=8192).strip()
        max_chars = a.integer("max_chars", default=default, minimum=_MIN_CHARS, maximum=most)
        assert max_chars is not None
        fetched = await fetch(url, settings)
        page = await render(fetched, settings)
        return _format(page, fetched.url, fetched.redirects, max_chars, most)

    description = _DESCRIPTION.format(default=default, most=most)
    return Tool(
        name="web_fetch",
        description=description if settings.allow_private else description + _PRIVATE_NOTE,
        parameters=_parameters(default, most),
        handler=_web_fetch,
        toolset="web",
        max_result_chars=most + HEADER_ROOM,
    )

