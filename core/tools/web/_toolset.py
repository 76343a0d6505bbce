"""The ``web`` toolset for one daemon run: what ``tools.web`` allows."""

from __future__ import annotations

from .._base import Tool
from ._fetch_tool import web_fetch_tool
from ._search import search_unavailable_reason, web_search_tool
from ._settings import WebSettings

__all__ = ["web_search_unavailable_reason", "web_tools"]


def web_tools(settings: WebSettings) -> list[Tool]:
    """``web_fetch`` always; ``web_search`` only when a search service is configured (a tool that
    can only fail is not offered to the model: it would try it and apologise)."""
    tools = [web_fetch_tool(settings)]
    if web_search_unavailable_reason(settings) is None:
        tools.append(web_search_tool(settings))
    return tools


def web_search_unavailable_reason(settings: WebSettings) -> str | None:
    """Why ``web_search`` is absent from ``web_tools(settings)`` (for ``/tools``), or None."""
    return search_unavailable_reason(settings)
