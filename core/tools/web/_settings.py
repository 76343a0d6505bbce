"""What the web tools are allowed to do: one frozen value the daemon builds from ``tools.web``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address

__all__ = ["Address", "WebSettings"]

Address = IPv4Address | IPv6Address


@dataclass(frozen=True)
class WebSettings:
    """``tools.web.*`` of config.yaml, in the units the tools use.

    The daemon maps ``max_download_mb`` to ``max_download_bytes`` and ``search.url`` to
    ``search_url``; core never reads config itself.
    """

    #: fetch from loopback, private, link-local, CGNAT, ... addresses too. The cloud metadata
    #: addresses stay refused even then: they hand out the machine's credentials.
    allow_private: bool = False
    #: one web_fetch (all its redirects and its body) or web_search gives up after this many seconds
    timeout: float = 20.0
    #: a body larger than this is cut (declared larger by Content-Length: refused unread)
    max_download_bytes: int = 5 * 2**20
    #: the search service (a SearXNG instance with its JSON format enabled); None: no web_search
    search_url: str | None = None
    #: which service ``search_url`` is; only "searxng" so far
    search_provider: str = "searxng"
    #: results web_search returns at most (the model may ask for fewer)
    search_max_results: int = 8
    #: the most characters of a page web_fetch returns (the model may ask for fewer; 20 000 by
    #: default). Keep it ``HEADER_ROOM`` under the registry's cap on a result
    #: (``agent.max_tool_result_kb``), or a long page is cut again without web_fetch's note.
    max_chars: int = 100_000
    user_agent: str = "Mozilla/5.0 (compatible; hermes-gateway/0.1; +web_fetch)"
    #: for tests only: which addresses are refused, in place of the real check (a test server
    #: listens on 127.0.0.1, so a test forbids e.g. 127.0.0.2 alone). None: the real check.
    #: Metadata addresses are refused whatever this says.
    forbidden: Callable[[Address], bool] | None = None
