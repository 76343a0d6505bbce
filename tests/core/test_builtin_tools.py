"""The six built-in tools as the agent sees them: registered, schema-valid, dispatched, fuzz-proof."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.memory import MemoryStore
from core.skills import SkillStore
from core.tools import ToolRegistry, ToolsetPolicy, builtin_tools
from core.tools._base import Tool, ToolContext, ToolError
from core.tools.memory_tool import MEMORY_TOOL
from core.tools.session_search import SESSION_SEARCH_TOOL
from core.tools.skills_tools import SKILL_TOOLS
from storage import StateStore, bindings

MINE: list[Tool] = [MEMORY_TOOL, SESSION_SEARCH_TOOL, *SKILL_TOOLS]
T0 = 1_700_000_000.0
SKILL = "---\nname: demo\ndescription: A demo skill\n---\n# Demo\nDo the thing.\n"


def _ctx(home: Path, store: StateStore) -> ToolContext:
    return ToolContext(session_id="s-now", platform="telegram", home=home, store=store, user_id="42",
                       session_key="agent:main:telegram:dm:42")


def test_exactly_the_six_builtin_tools_of_the_guide_send_file_and_cronjob() -> None:
    assert sorted(t.name for t in builtin_tools()) == [
        "cronjob", "memory", "send_file", "session_search", "skill_manage", "skill_view", "skills_categories", "skills_list"]
    assert {t.name: t.toolset for t in MINE} == {
        "memory": "memory", "session_search": "session_search", "skills_categories": "skills",
        "skills_list": "skills", "skill_view": "skills", "skill_manage": "skills"}


@pytest.mark.parametrize("tool", MINE, ids=lambda t: t.name)
def test_schemas_are_valid_openai_function_schemas(tool: Tool) -> None:
    schema = tool.schema()
    assert schema["type"] == "function" and schema["function"]["name"] == tool.name
    params = schema["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    assert params["type"] == "object" and params.get("additionalProperties") is False
    assert set(params.get("required", [])) <= set(params["properties"])
    assert 50 < len(tool.description) < 2_000
    json.dumps(schema)  # serialisable as the `tools` array


def test_toolsets_can_be_switched_off_per_platform() -> None:
    registry = ToolRegistry(MINE)
    assert sorted(registry.for_platform(ToolsetPolicy(disabled=frozenset({"skills"}))).names) == [
        "memory", "session_search"]


async def test_dispatch_through_the_registry(tmp_path: Path, store: StateStore) -> None:
    registry = ToolRegistry(MINE)
    ctx = _ctx(tmp_path, store)
    added = await registry.dispatch(
        "memory", json.dumps({"action": "add", "target": "user", "content": "Prefers metric units."}), ctx)
    assert added.ok and json.loads(added.content)["entries"] == ["Prefers metric units."]
    assert MemoryStore(tmp_path).snapshot().user == "Prefers metric units."

    created = await registry.dispatch("skill_manage", {"action": "create", "name": "demo", "content": SKILL}, ctx)
    assert created.ok, created.content
    escaped = await registry.dispatch(
        "skill_manage",
        {"action": "write_file", "name": "demo", "file_path": "../../memories/MEMORY.md", "file_content": "x"},
        ctx,
    )
    assert not escaped.ok and escaped.content.startswith("Error:") and "'..'" in escaped.content
    assert not (tmp_path / "memories" / "MEMORY.md").exists()  # USER.md was written, MEMORY.md never
    listed = await registry.dispatch("skills_list", None, ctx)
    assert json.loads(listed.content)["skills"][0]["name"] == "demo"

    await store.create_session("old", "telegram")
    await store.append_message("old", "user", "metric conversions for the bakery recipe")
    # An earlier session of this chat: session_search reads only the chat's own sessions.
    await store.write(lambda c: bindings.bind(c, "agent:main:telegram:dm:42", "old", platform="telegram",
                                              chat_id="42", chat_type="dm", thread_id=None, user_id="42", now=T0))
    found = await registry.dispatch("session_search", {"query": "bakery"}, ctx)
    assert json.loads(found.content)["results"][0]["session_id"] == "old"

    bad = await registry.dispatch("memory", {"action": "add", "target": "user", "contents": "typo"}, ctx)
    assert not bad.ok and "invalid arguments" in bad.content
    full = await registry.dispatch("memory", {"action": "add", "target": "user", "content": "u" * 2000}, ctx)
    assert not full.ok and "Consolidate" in full.content


async def test_results_are_json_text(tmp_path: Path, store: StateStore) -> None:
    SkillStore(tmp_path).create("demo", SKILL)
    ctx = _ctx(tmp_path, store)
    for tool, args in (
        (MEMORY_TOOL, {"action": "add", "target": "memory", "content": "x"}),
        (SESSION_SEARCH_TOOL, {}),
        (SKILL_TOOLS[0], {}),
        (SKILL_TOOLS[1], {"name": "demo"}),
        (SKILL_TOOLS[2], {"action": "patch", "name": "demo", "old_string": "thing", "new_string": "other thing"}),
    ):
        result = await tool.handler(args, ctx)
        assert isinstance(result, str) and isinstance(json.loads(result), dict)
        assert len(result) <= tool.max_result_chars


# ---------------------------------------------------------------------- fuzz

_KEYS = st.sampled_from([
    "action", "target", "content", "old_text", "name", "category", "file_path", "file_content", "old_string",
    "new_string", "query", "session_id", "around_message_id", "window", "limit", "sort", "role_filter", "x",
])
_ACTIONS = st.sampled_from(["add", "replace", "remove", "create", "patch", "edit", "delete", "write_file",
                            "remove_file", "memory", "user"])
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    st.text(max_size=50), _ACTIONS, st.sampled_from(["demo", "../demo", "references/a.md", "/etc/passwd",
                                                     "references/../../x", "Do the thing.", "\ud800", "§"]),
)
_VALUES = st.one_of(_SCALARS, st.lists(_SCALARS, max_size=3), st.dictionaries(st.text(max_size=5), _SCALARS,
                                                                                max_size=2))
_ARGS = st.one_of(
    st.dictionaries(_KEYS, _VALUES, max_size=6),
    st.fixed_dictionaries({"action": _ACTIONS, "name": st.sampled_from(["demo", "new-one"]),
                           "target": st.sampled_from(["memory", "user"])},
                          optional={"content": _SCALARS, "old_text": _SCALARS, "file_path": _SCALARS,
                                    "file_content": _SCALARS, "old_string": _SCALARS, "new_string": _SCALARS}),
    _SCALARS,  # not even an object
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.sampled_from(MINE), args=_ARGS)
async def test_fuzzed_arguments_give_a_result_or_a_tool_error(
    tmp_path: Path, store: StateStore, tool: Tool, args: Any
) -> None:
    home = tmp_path / "fuzz-home"
    skills = SkillStore(home)
    if not skills.index():
        skills.create("demo", SKILL)
    try:
        result = await tool.handler(args, _ctx(home, store))
    except ToolError as exc:
        assert str(exc)
    else:
        assert isinstance(json.loads(result), dict)
    # Whatever happened, nothing was written outside $HERMES_HOME's memories/ and skills/.
    stray = [p for p in home.rglob("*") if p.is_file() and not (
        (home / "memories") in p.parents or (home / "skills") in p.parents)]
    assert not any(p.is_file() for p in tmp_path.iterdir())  # noqa: ASYNC240 - a test's own tmp dir
    assert stray == []
