"""The tool registry: schemas, toolsets, validation, truncation, errors as results."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from core.tools import Tool, ToolContext, ToolRegistry, ToolsetPolicy, builtin_tools
from storage import StateStore

from ._agent_env import CRASH, ECHO, FAIL


@pytest.fixture
def ctx(store: StateStore, tmp_path: Path) -> ToolContext:
    return ToolContext(session_id="s1", platform="api-server", home=tmp_path, store=store)


async def test_schemas_are_openai_tools() -> None:
    reg = ToolRegistry([ECHO, FAIL])
    assert reg.schemas() == [
        {"type": "function", "function": {"name": "echo", "description": "Echo text back.",
                                          "parameters": dict(ECHO.parameters)}},
        {"type": "function", "function": {"name": "fail", "description": "Always refuses.",
                                          "parameters": {"type": "object", "properties": {}}}},
    ]


def test_builtin_tools_are_the_six_of_the_guide_send_file_and_cronjob() -> None:
    names = sorted(t.name for t in builtin_tools())
    assert names == ["cronjob", "memory", "send_file", "session_search", "skill_manage", "skill_view", "skills_categories",
                     "skills_list"]
    ToolRegistry(builtin_tools())  # every schema is valid JSON schema


def test_duplicate_and_invalid_schemas_are_refused() -> None:
    reg = ToolRegistry([ECHO])
    with pytest.raises(ValueError, match="already registered"):
        reg.register(ECHO)
    bad = Tool("bad", "x", {"type": "object", "properties": {"n": {"type": "no-such-type"}}}, ECHO.handler)
    with pytest.raises(ValueError, match="invalid parameters schema"):
        reg.register(bad)


def test_toolsets_per_platform() -> None:
    reg = ToolRegistry([ECHO, CRASH, *builtin_tools()])
    assert "crash" not in reg.for_platform(ToolsetPolicy(disabled=frozenset({"buggy"})))
    only_memory = reg.for_platform(ToolsetPolicy(enabled=frozenset({"memory"})))
    assert only_memory.names == ["memory"]
    assert len(reg.for_platform(ToolsetPolicy())) == len(reg)
    both = ToolsetPolicy(enabled=frozenset({"core", "buggy"}), disabled=frozenset({"buggy"}))
    assert reg.for_platform(both).names == ["echo"]


async def test_valid_call_runs_the_handler(ctx: ToolContext) -> None:
    out = await ToolRegistry([ECHO]).dispatch("echo", json.dumps({"text": "hi"}), ctx)
    assert out.ok and out.content == "echoed hi"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"text": 5}', "invalid arguments for echo: text: 5 is not of type 'string'"),
        ("{}", "'text' is a required property"),
        ('{"text": "a", "extra": 1}', "Additional properties are not allowed"),
        ("{not json", "not a JSON object (invalid JSON"),
        ("[1, 2]", "not a JSON object (got a JSON list)"),
    ],
)
async def test_bad_arguments_become_error_results(ctx: ToolContext, arguments: str, expected: str) -> None:
    out = await ToolRegistry([ECHO]).dispatch("echo", arguments, ctx)
    assert not out.ok
    assert out.content.startswith("Error:") and expected in out.content


async def test_unknown_tool_lists_the_available_ones(ctx: ToolContext) -> None:
    out = await ToolRegistry([ECHO, FAIL]).dispatch("rm_rf", "{}", ctx)
    assert not out.ok and "no tool named 'rm_rf'" in out.content and "echo, fail" in out.content


async def test_tool_error_and_crash_become_results(ctx: ToolContext) -> None:
    reg = ToolRegistry([FAIL, CRASH])
    refused = await reg.dispatch("fail", "", ctx)
    assert refused == type(refused)("Error: the disk is on fire; try another path", False)
    crashed = await reg.dispatch("crash", None, ctx)
    assert not crashed.ok and "failed unexpectedly (RuntimeError)" in crashed.content
    assert "boom" not in crashed.content  # internals stay in the log


async def test_long_results_are_truncated_with_a_note(ctx: ToolContext) -> None:
    async def big(args: Mapping[str, Any], c: ToolContext) -> str:
        return "x" * 5000

    reg = ToolRegistry([Tool("big", "big", {"type": "object"}, big, max_result_chars=1000)])
    out = await reg.dispatch("big", "{}", ctx)
    assert out.ok and len(out.content) <= 1000
    assert out.content.endswith("[result truncated: 4100 of 5000 characters left out]")
    assert out.content.startswith("x" * 900)


async def test_the_registry_wide_cap_wins_over_a_tools_own_and_holds_in_its_views(ctx: ToolContext) -> None:
    async def big(args: Mapping[str, Any], c: ToolContext) -> str:
        return "y" * 50_000

    reg = ToolRegistry([Tool("big", "big", {"type": "object"}, big, max_result_chars=40_000)],
                       max_result_chars=2048)
    for view in (reg, reg.for_platform(ToolsetPolicy()), reg.only(["big"])):
        out = await view.dispatch("big", "{}", ctx)
        assert len(out.content) <= 2048
        assert out.content.endswith(f"[result truncated: {50_000 - 1948} of 50000 characters left out]")
    loose = ToolRegistry([Tool("big", "big", {"type": "object"}, big, max_result_chars=40_000)],
                         max_result_chars=100_000)
    assert len((await loose.dispatch("big", "{}", ctx)).content) <= 40_000  # the tool's own cap still holds


async def test_cancellation_passes_through(ctx: ToolContext) -> None:
    started = asyncio.Event()

    async def slow(args: Mapping[str, Any], c: ToolContext) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    reg = ToolRegistry([Tool("slow", "slow", {"type": "object"}, slow)])
    task = asyncio.create_task(reg.dispatch("slow", "{}", ctx))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 10)
