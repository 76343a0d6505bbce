"""The ``web_search`` tool: a query to a list of results, through the operator's search service.

Only SearXNG so far (``GET {url}/search?q=...&format=json``); another provider is one more
function in ``_PROVIDERS``. The service is the operator's choice (``tools.web.search.url``),
often a SearXNG container on the same host or LAN, so it is reached *without* the SSRF guard on
purpose: the model chooses the query, never the address. The results' URLs, which the model
may fetch next, go through the guard like any other.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import structlog
from yarl import URL

from .._args import Args
from .._base import Tool, ToolContext, ToolError
from ._http import read_capped
from ._settings import WebSettings

__all__ = ["search_unavailable_reason", "web_search_tool"]

log = structlog.get_logger("hermes.tools.web")

#: a page of JSON results is some tens of KB; more than this is not a search answer
_MAX_RESPONSE_BYTES = 2 * 2**20
_MAX_SNIPPET_CHARS = 400
_MAX_QUERY_CHARS = 500
_SPACES = re.compile(r"\s+")
#: what SearXNG's limiter (when the operator turned it on) looks for in a browser's request: an
#: Accept naming text/html and an Accept-Language; without them it answers 429 to every search
_HEADERS = {"Accept": "application/json, text/html;q=0.1", "Accept-Language": "*"}

_DESCRIPTION = (
    "Search the web. Returns a numbered list of results (title, URL, snippet). Read a result in full "
    "with web_fetch. Write the query as you would in a search engine; 'max_results' asks for fewer "
    "results (at most {most})."
)


@dataclass(frozen=True)
class _Result:
    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class _Results:
    results: list[_Result]
    #: direct answers some engines give ("42 °C", a definition)
    answers: list[str]
    #: engines that failed, with why (a search with no results may be an outage)
    failed: list[str]


def _clean(value: object, limit: int) -> str:
    text = _SPACES.sub(" ", value).strip() if isinstance(value, str) else ""
    return text if len(text) <= limit else text[:limit].rstrip() + "…"


def _endpoint(base: str, query: str) -> URL:
    url = URL(base)
    if not url.path.rstrip("/").endswith("/search"):
        # with_path drops the query; an instance behind a proxy may need one (a token)
        url = url.with_path(url.path.rstrip("/") + "/search").with_query(url.query)
    return url.update_query(q=query, format="json")


def _status_error(status: int) -> ToolError:
    if status == 403:
        return ToolError("The search service refused to answer in JSON (HTTP 403). Its operator must enable "
                         "the json format in the SearXNG settings.yml (search: formats: [html, json]).")
    if status == 429:
        return ToolError("The search service is limiting requests (HTTP 429). Try again later; if it persists, "
                         "its operator should let the gateway's address past the SearXNG limiter.")
    return ToolError(f"The search service answered HTTP {status}; try again later.")


def _parse(payload: Any, count: int) -> _Results:
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise ToolError("The search service's answer has no results list; is tools.web.search.url a SearXNG "
                        "instance?")
    results = []
    for item in payload["results"]:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        results.append(_Result(_clean(item.get("title"), 300) or "(no title)", _clean(item["url"], 2000),
                               _clean(item.get("content"), _MAX_SNIPPET_CHARS)))
        if len(results) == count:
            break
    answers = [_clean(a.get("answer") if isinstance(a, dict) else a, 500) for a in payload.get("answers") or []]
    failed = [f"{e[0]} ({e[1]})" for e in payload.get("unresponsive_engines") or []
              if isinstance(e, list | tuple) and len(e) == 2]
    return _Results(results, [a for a in answers if a][:3], failed[:5])


async def _searxng(query: str, count: int, settings: WebSettings) -> _Results:
    assert settings.search_url is not None
    endpoint = _endpoint(settings.search_url, query)
    host = endpoint.raw_host or "the search service"
    try:
        async with asyncio.timeout(settings.timeout), aiohttp.ClientSession(
                trust_env=False, headers=_HEADERS | {"User-Agent": settings.user_agent},
        ) as session, session.get(endpoint) as resp:
            if resp.status != 200:
                log.warning("web.search_failed", host=host, status=resp.status)
                raise _status_error(resp.status)
            body = bytearray()
            if await read_capped(resp, _MAX_RESPONSE_BYTES, body):
                raise ToolError("The search service's answer is too large to be a page of results.")
    except TimeoutError:
        log.warning("web.search_failed", host=host, error="timeout")
        raise ToolError(f"The search service did not answer within {settings.timeout:g} s; try again.") from None
    except aiohttp.ClientError as exc:
        # The operator's problem more than the model's: the log names it, the model can tell the user.
        log.warning("web.search_failed", host=host, error=type(exc).__name__)
        raise ToolError(f"The search service at {host} cannot be reached ({type(exc).__name__}).") from None
    try:
        payload = json.loads(body)
    except ValueError:
        raise ToolError("The search service did not answer in JSON; is tools.web.search.url a SearXNG "
                        "instance?") from None
    return _parse(payload, count)


_Provider = Callable[[str, int, WebSettings], Awaitable[_Results]]
_PROVIDERS: dict[str, _Provider] = {"searxng": _searxng}


def search_unavailable_reason(settings: WebSettings) -> str | None:
    """Why web_search is not offered to the model (for ``/tools``), or None when it is."""
    if not settings.search_url:
        return "no search service is configured (set tools.web.search.url to a SearXNG instance)"
    if settings.search_provider not in _PROVIDERS:
        return f"the search provider {settings.search_provider!r} is not supported (known: {', '.join(_PROVIDERS)})"
    return None


def _format(query: str, found: _Results) -> str:
    if not found.results and not found.answers:
        failed = f" Search engines that failed: {', '.join(found.failed)}." if found.failed else ""
        return f'No results for "{query}".{failed} Try other words.'
    lines = [f'Search results for "{query}":']
    lines.extend(f"Answer: {answer}" for answer in found.answers)
    for number, result in enumerate(found.results, 1):
        lines.append(f"\n{number}. {result.title}\n   {result.url}")
        if result.snippet:
            lines.append(f"   {result.snippet}")
    return "\n".join(lines)


def web_search_tool(settings: WebSettings) -> Tool:
    """``web_search`` bound to ``settings`` (which must name a search service)."""
    reason = search_unavailable_reason(settings)
    if reason is not None:
        raise ValueError(f"web_search is unavailable: {reason}")
    provider = _PROVIDERS[settings.search_provider]
    most = max(settings.search_max_results, 1)

    async def _web_search(args: Mapping[str, Any], ctx: ToolContext) -> str:
        a = Args(args)
        query = _SPACES.sub(" ", a.required_text("query", max_chars=_MAX_QUERY_CHARS)).strip()
        if not query:
            raise ToolError("'query' is empty.")
        count = a.integer("max_results", default=most, minimum=1, maximum=50)
        assert count is not None
        found = await provider(query, min(count, most), settings)
        log.info("web.searched", results=len(found.results))
        return _format(query, found)

    return Tool(
        name="web_search",
        description=_DESCRIPTION.format(most=most),
        parameters={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for."},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 50,
                                "description": f"How many results at most (default and most: {most})."},
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        handler=_web_search,
        toolset="web",
    )
