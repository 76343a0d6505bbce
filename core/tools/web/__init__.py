"""The ``web`` toolset: ``web_fetch`` (a URL to readable markdown) and ``web_search`` (SearXNG).

Rooms: ``_settings`` (``WebSettings``), ``_guard`` (the SSRF guard: which addresses may be
connected to).
"""

from ._guard import UrlRefusedError, address_refusal
from ._settings import Address, WebSettings

__all__ = [
    "Address",
    "UrlRefusedError",
    "WebSettings",
    "address_refusal",
]
