"""The ``web`` toolset: ``web_fetch`` (a URL to readable markdown) and ``web_search`` (SearXNG).

``web_tools(settings)`` gives the tools for a run; ``web_search_unavailable_reason`` says why
``web_search`` is not among them. Rooms: ``_settings`` (``WebSettings``), ``_guard`` (the SSRF
guard: which addresses may be connected to), ``_http`` (one guarded GET with its redirects and
caps), ``_content`` (HTML, text or something else), ``_plain`` and ``_render`` (a body made
readable), ``_fetch_tool`` and ``_search`` (the two tools), ``_toolset``.

Its names load on first use (PEP 562): the error tree needs UrlRefusedError only
(``errors``), not the HTTP client the tools bring.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
    from ._fetch_tool import HEADER_ROOM
    from ._guard import address_refusal
    from ._settings import Address, WebSettings
    from ._toolset import web_search_unavailable_reason, web_tools
    from .errors import UrlRefusedError

__all__ = [
    "HEADER_ROOM",
    "Address",
    "UrlRefusedError",
    "WebSettings",
    "address_refusal",
    "web_search_unavailable_reason",
    "web_tools",
]

_WHERE = {
    "Address": "core.tools.web._settings",
    "HEADER_ROOM": "core.tools.web._fetch_tool",
    "UrlRefusedError": "core.tools.web.errors",
    "WebSettings": "core.tools.web._settings",
    "address_refusal": "core.tools.web._guard",
    "web_search_unavailable_reason": "core.tools.web._toolset",
    "web_tools": "core.tools.web._toolset",
}

__getattr__ = lazy_names(__name__, _WHERE)
