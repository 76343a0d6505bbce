"""The four tools as the model and the gateway see them: names, schemas, tags, settings, and the
registry's promise that no input ends a turn."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from core.tools import ToolContext, ToolRegistry, ToolsetPolicy
from core.tools.files import FILES_TOOLSET, WRITES_TAG, FilesSettings, file_tools


def test_four_tools_in_the_files_toolset_writes_tagged(settings: FilesSettings) -> None:
    tools = {t.name: t for t in file_tools(settings)}
    assert sorted(tools) == ["patch", "read_file", "search_files", "write_file"]
    assert {t.toolset for t in tools.values()} == {FILES_TOOLSET} == {"files"}
    assert sorted(n for n, t in tools.items() if WRITES_TAG in t.tags) == ["patch", "write_file"]
    assert WRITES_TAG == "writes"
    assert tools["read_file"].max_result_chars > settings.max_read_bytes
    for tool in tools.values():
        params = tool.schema()["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(params)
        assert params["additionalProperties"] is False and set(params.get("required", [])) <= set(params["properties"])
        assert 50 < len(tool.description) < 2_000 and str(settings.roots[0]) in tool.description
        json.dumps(tool.schema())
    ToolRegistry(tools.values())  # registrable beside nothing else of the same name
    assert ToolRegistry(tools.values()).for_platform(ToolsetPolicy(disabled=frozenset({"files"}))).names == []


def test_settings_from_config(home: Path) -> None:
    default = FilesSettings.for_home(home)
    assert default.roots == (home / "workspace",) and default.max_read_bytes == 256 * 1024
    s = FilesSettings.for_home(home, ["projects", "/srv/data", "~/notes"], max_read_kb=64)
    assert s.roots == (home / "projects", Path("/srv/data"), Path.home() / "notes")
    assert s.max_read_bytes == 64 * 1024 and s.home == home
    assert FilesSettings(roots=(home,), home=home).protected == (home, Path.home() / ".ssh")
    with pytest.raises(ValueError):
        FilesSettings(roots=(), home=home)
    with pytest.raises(ValueError):
        FilesSettings.for_home(home, max_search_files=0)
    with pytest.raises(ValueError):
        FilesSettings.for_home(home, search_timeout=0)


def _fuzz_value() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=30),
                     st.sampled_from(["../../etc/passwd", "/etc/shadow", "~", ".", "/proc/self/environ", "\x00"]),
                     st.lists(st.integers(), max_size=2))


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["read_file", "write_file", "patch", "search_files"]),
       args=st.dictionaries(st.sampled_from(["path", "content", "offset", "limit", "old_string", "new_string",
                                              "replace_all", "pattern", "regex", "ignore_case", "other"]),
                            _fuzz_value(), max_size=5))
def test_no_input_raises_through_the_registry(registry: ToolRegistry, ctx: ToolContext, home: Path,
                                              name: str, args: dict[str, Any]) -> None:
    outcome = asyncio.run(registry.dispatch(name, args, ctx))
    assert isinstance(outcome.content, str) and outcome.content
    assert "unexpectedly" not in outcome.content, outcome.content  # a crash, not a refusal
    assert not (home / ".env").exists()
