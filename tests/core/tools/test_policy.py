"""Which tools a chat gets: toolsets per platform (``mcp`` and ``mcp:<server>``), groups, and the
tools that are listed but not offered."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from core.tools import GroupToolPolicy, Tool, ToolContext, ToolRegistry, ToolsetPolicy, tool_overview
from core.tools.mcp import McpServerStatus
from storage import StateStore


async def _ok(args: Mapping[str, Any], ctx: ToolContext) -> str:
    return "ok"


def _tool(name: str, toolset: str, *, tags: tuple[str, ...] = (), unavailable: str | None = None) -> Tool:
    return Tool(name, f"{name} does things", {"type": "object"}, _ok, toolset=toolset, tags=tags,
                unavailable=unavailable)


@pytest.mark.parametrize(("enabled", "disabled", "allowed"), [
    (None, (), {"mcp:github", "mcp:files", "core"}),
    (None, ("mcp",), {"core"}),
    (None, ("mcp:github",), {"mcp:files", "core"}),
    (("mcp",), (), {"mcp:github", "mcp:files"}),
    (("mcp:files", "core"), (), {"mcp:files", "core"}),
    (("mcp",), ("mcp:files",), {"mcp:github"}),
    (("mcp:github",), ("mcp",), set()),
    (("core",), (), {"core"}),
])
def test_mcp_toolsets_are_named_as_a_family_or_one_server(
        enabled: tuple[str, ...] | None, disabled: tuple[str, ...], allowed: set[str]) -> None:
    policy = ToolsetPolicy(frozenset(enabled) if enabled is not None else None, frozenset(disabled))
    assert {t for t in ("mcp:github", "mcp:files", "core") if policy.allows(t)} == allowed


def test_a_registry_names_the_families_of_its_toolsets() -> None:
    registry = ToolRegistry([_tool("mcp_gh_issues", "mcp:gh"), _tool("memory", "core")])
    assert registry.toolsets == {"mcp:gh", "mcp", "core"}


def test_a_plain_toolset_is_not_a_family() -> None:
    assert not ToolsetPolicy(frozenset({"mcp"})).allows("mcpx")
    assert ToolsetPolicy(disabled=frozenset({"mcp"})).allows("mcpx")


def test_terminal_and_writes_are_off_in_groups_unless_allowed() -> None:
    registry = ToolRegistry([_tool("terminal", "terminal", tags=("writes",)),
                             _tool("write_file", "files", tags=("writes",)),
                             _tool("read_file", "files"), _tool("memory", "core")])
    everything = ToolsetPolicy()
    strict = GroupToolPolicy()
    for chat_type in ("dm", None):
        assert len(registry.for_platform(everything, chat_type, strict)) == 4
    for chat_type in ("group", "channel", "thread"):
        assert sorted(registry.for_platform(everything, chat_type, strict).names) == ["memory", "read_file"]
    terminal_only = registry.for_platform(everything, "group", GroupToolPolicy(terminal=True))
    assert "terminal" in terminal_only and "write_file" not in terminal_only
    writes_only = registry.for_platform(everything, "group", GroupToolPolicy(file_writes=True))
    assert "write_file" in writes_only and "terminal" not in writes_only


async def test_a_call_to_a_tool_off_in_groups_says_why(store: StateStore, tmp_path: Path) -> None:
    registry = ToolRegistry([_tool("terminal", "terminal", tags=("writes",)),
                             _tool("write_file", "files", tags=("writes",)), _tool("memory", "core")])
    view = registry.for_platform(ToolsetPolicy(), "group", GroupToolPolicy())
    ctx = ToolContext(session_id="s1", platform="telegram", home=tmp_path, store=store)
    for name, key in (("terminal", "terminal"), ("write_file", "file_writes")):
        out = await view.dispatch(name, {}, ctx)
        assert not out.ok and out.content.startswith(f"Error: {name} is off in groups and channels")
        assert f"tools.groups.{key}" in out.content
    unknown = await view.dispatch("nope", {}, ctx)
    assert "there is no tool named 'nope'" in unknown.content


def test_an_unavailable_tool_is_listed_but_not_offered() -> None:
    registry = ToolRegistry([_tool("web_search", "web", unavailable="no search URL (tools.web.search.url)"),
                             _tool("web_fetch", "web")])
    assert registry.for_platform(ToolsetPolicy()).names == ["web_fetch"]
    overview = tool_overview(registry, ToolsetPolicy(), GroupToolPolicy(), "telegram", "dm")
    rows = {t.name: t for t in overview.tools}
    assert rows["web_search"].off == "unavailable" and "no search URL" in (rows["web_search"].reason or "")
    assert rows["web_fetch"].off is None


def test_the_overview_says_why_each_tool_is_off() -> None:
    registry = ToolRegistry([_tool("terminal", "terminal"), _tool("mcp_gh_issues", "mcp:gh"),
                             _tool("memory", "core")])
    servers = [McpServerStatus("gh", "ready", ("mcp_gh_issues",)),
               McpServerStatus("db", "restarting", ("mcp_db_query",), last_error="the process exited"),
               McpServerStatus("never", "failed", (), last_error="cannot start")]
    overview = tool_overview(registry, ToolsetPolicy(disabled=frozenset({"mcp:gh"})), GroupToolPolicy(),
                             "discord", "group", servers)
    rows = {t.name: t for t in overview.tools}
    assert rows["memory"].off is None
    assert rows["terminal"].off == "group" and "tools.groups.terminal" in (rows["terminal"].reason or "")
    assert rows["mcp_gh_issues"].off == "toolset" and "mcp:gh" in (rows["mcp_gh_issues"].reason or "")
    assert rows["mcp_db_query"].off == "server"
    assert "db is restarting: the process exited" in (rows["mcp_db_query"].reason or "")
    assert [s.name for s in overview.servers] == ["gh", "db", "never"]
    again = type(overview).from_dict(overview.as_dict())
    assert again == overview
