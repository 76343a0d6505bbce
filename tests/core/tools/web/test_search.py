"""web_search against a fake SearXNG on 127.0.0.1, and when the web toolset offers it at all."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from core.tools import Tool, ToolContext, ToolError, ToolRegistry
from core.tools.web import WebSettings, web_search_unavailable_reason, web_tools

from ._server import WebServer, silent_listener


def _search_tool(url: str, **settings: Any) -> Tool:
    tools = {t.name: t for t in web_tools(WebSettings(search_url=url, **settings))}
    return tools["web_search"]


def test_without_a_search_url_only_web_fetch_is_offered() -> None:
    settings = WebSettings()
    assert [t.name for t in web_tools(settings)] == ["web_fetch"]
    reason = web_search_unavailable_reason(settings)
    assert reason is not None and "tools.web.search.url" in reason
    assert [t.name for t in web_tools(WebSettings(search_url=""))] == ["web_fetch"]


def test_with_a_search_url_both_are_offered_in_the_web_toolset() -> None:
    settings = WebSettings(search_url="http://127.0.0.1:8888")
    tools = web_tools(settings)
    assert [t.name for t in tools] == ["web_fetch", "web_search"]
    assert {t.toolset for t in tools} == {"web"}
    assert web_search_unavailable_reason(settings) is None
    for tool in tools:
        params = tool.schema()["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert params["additionalProperties"] is False and 50 < len(tool.description) < 2000
        json.dumps(tool.schema())


def test_an_unknown_provider_is_not_offered() -> None:
    settings = WebSettings(search_url="http://127.0.0.1:8888", search_provider="bing")
    assert [t.name for t in web_tools(settings)] == ["web_fetch"]
    assert "'bing' is not supported" in (web_search_unavailable_reason(settings) or "")


async def test_results_are_a_numbered_list(server: WebServer, ctx: ToolContext) -> None:
    # The instance is on 127.0.0.1, which web_fetch refuses: the operator's own service is not guarded.
    result = await _search_tool(server.url("/searx"), search_max_results=3).handler({"query": "hermes  gateway"}, ctx)
    assert result == ('Search results for "hermes gateway":\nAnswer: forty-two\n'
                      "\n1. Result 1\n   https://example.org/1\n   Snippet number 1."
                      "\n\n2. Result 2\n   https://example.org/2\n   Snippet number 2."
                      "\n\n3. Result 3\n   https://example.org/3\n   Snippet number 3.")
    assert server.searches == [{"q": "hermes gateway", "format": "json"}]
    # What SearXNG's limiter wants of a client, so an instance with it on still answers
    headers = server.search_headers[0]
    assert "text/html" in headers["Accept"] and headers["Accept-Language"]
    assert "gzip" in headers["Accept-Encoding"] and "Python" not in headers["User-Agent"]


@pytest.mark.parametrize("path", ["/searx", "/searx/", "/searx/search", "/searx?token=t", "/searx/search?token=t"])
async def test_the_search_path_is_found_however_the_url_is_written(server: WebServer, ctx: ToolContext,
                                                                   path: str) -> None:
    assert "1. Result 1" in await _search_tool(server.url(path)).handler({"query": "x"}, ctx)
    assert server.searches[-1] == {"q": "x", "format": "json", **({"token": "t"} if "token" in path else {})}


async def test_max_results_asks_for_fewer_never_more(server: WebServer, ctx: ToolContext) -> None:
    tool = _search_tool(server.url("/searx"), search_max_results=5)
    assert "\n2. " in (two := await tool.handler({"query": "x", "max_results": 2}, ctx)) and "\n3. " not in two
    many = await tool.handler({"query": "x", "max_results": 50}, ctx)
    assert "\n5. " in many and "\n6. " not in many


async def test_no_results_says_so_and_names_failed_engines(server: WebServer, ctx: ToolContext) -> None:
    result = await _search_tool(server.url("/searx")).handler({"query": "nothing"}, ctx)
    assert result == 'No results for "nothing". Search engines that failed: google (timeout). Try other words.'


async def test_403_explains_the_json_format_setting(server: WebServer, ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match=r"HTTP 403\).*enable the json format in the SearXNG settings\.yml"):
        await _search_tool(server.url("/noformat")).handler({"query": "x"}, ctx)


@pytest.mark.parametrize("path", ["/notsearx", "/wrongshape"])
async def test_an_answer_that_is_not_searxng_json_is_explained(server: WebServer, ctx: ToolContext,
                                                               path: str) -> None:
    with pytest.raises(ToolError, match="SearXNG instance"):
        await _search_tool(server.url(path)).handler({"query": "x"}, ctx)


async def test_an_unreachable_or_silent_service_is_clear(ctx: ToolContext) -> None:
    async with silent_listener() as (port, _):
        with pytest.raises(ToolError, match=r"did not answer within 0\.5 s"):
            await _search_tool(f"http://127.0.0.1:{port}", timeout=0.5).handler({"query": "x"}, ctx)
    with pytest.raises(ToolError, match=r"search service at 127\.0\.0\.1 cannot be reached"):
        await _search_tool(f"http://127.0.0.1:{port}").handler({"query": "x"}, ctx)


async def test_bad_arguments_are_refused_through_the_registry(server: WebServer, ctx: ToolContext) -> None:
    registry = ToolRegistry(web_tools(WebSettings(search_url=server.url("/searx"))))
    empty = await registry.dispatch("web_search", {"query": "   "}, ctx)
    assert not empty.ok and "'query' is empty" in empty.content
    missing = await registry.dispatch("web_search", {}, ctx)
    assert not missing.ok and "query" in missing.content
    ok = await registry.dispatch("web_search", '{"query": "hermes"}', ctx)
    assert ok.ok and "1. Result 1" in ok.content
