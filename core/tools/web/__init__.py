"""The ``web`` toolset: ``web_fetch`` (a URL to readable markdown) and ``web_search`` (SearXNG).

``web_tools(settings)`` gives the tools for a run; ``web_search_unavailable_reason`` says why
``web_search`` is not among them. Rooms: ``_settings`` (``WebSettings``), ``_guard`` (the SSRF
guard: which addresses may be connected to), ``_http`` (one guarded GET with its redirects and
caps), ``_content`` (HTML, text or something else), ``_plain`` and ``_render`` (a body made
readable), ``_fetch_tool`` and ``_search`` (the two tools), ``_toolset``.
"""

from ._fetch_tool import HEADER_ROOM
from ._guard import UrlRefusedError, address_refusal
from ._settings import Address, WebSettings
from ._toolset import web_search_unavailable_reason, web_tools

__all__ = [
    "HEADER_ROOM",
    "Address",
    "UrlRefusedError",
    "WebSettings",
    "address_refusal",
    "web_search_unavailable_reason",
    "web_tools",
]
