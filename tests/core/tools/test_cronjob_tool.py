"""The ``cronjob`` tool in core: arguments checked, the call handed to the turn's port, and a
plain answer when the turn has no port."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from core.tools import ToolContext, ToolError, ToolRegistry
from core.tools.cronjob import CRONJOB_TOOL
from storage import StateStore


class _Port:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def call(self, action: str, args: Mapping[str, Any]) -> str:
        self.calls.append((action, dict(args)))
        if args.get("schedule") == "bad":
            raise ToolError("'bad' is not a schedule")
        return f"done: {action}"


def _ctx(store: StateStore, tmp_path: Path, port: _Port | None) -> ToolContext:
    return ToolContext(session_id="s1", platform="telegram", home=tmp_path, store=store, cron=port)


async def test_calls_go_to_the_port_trimmed(store: StateStore, tmp_path: Path) -> None:
    port = _Port()
    reg = ToolRegistry([CRONJOB_TOOL])
    ctx = _ctx(store, tmp_path, port)
    out = await reg.dispatch("cronjob", {"action": "create", "name": " standup ", "schedule": "0 9 * * 1-5",
                                         "prompt": " Remind the user to stand up. ", "toolsets": ["web"]}, ctx)
    assert out.ok and out.content == "done: create"
    assert port.calls == [("create", {"name": "standup", "schedule": "0 9 * * 1-5",
                                      "prompt": "Remind the user to stand up.", "toolsets": ["web"]})]
    assert (await reg.dispatch("cronjob", {"action": "list"}, ctx)).content == "done: list"
    refused = await reg.dispatch("cronjob", {"action": "create", "schedule": "bad", "prompt": "x"}, ctx)
    assert not refused.ok and refused.content == "Error: 'bad' is not a schedule"


@pytest.mark.parametrize(("args", "message"), [
    ({"action": "create", "prompt": "x"}, "create needs 'schedule'"),
    ({"action": "create", "schedule": "every 1h"}, "create needs 'prompt'"),
    ({"action": "pause"}, "pause needs 'name'"),
    ({"action": "update", "name": "a"}, "update needs what changes"),
    ({"action": "explode"}, "is not one of"),
    ({"action": "create", "schedule": "every 1h", "prompt": "x", "catch_up": "always"}, "is not one of"),
    ({"action": "create", "schedule": "every 1h", "prompt": "x", "toolsets": "web"}, "toolsets"),
])
async def test_bad_calls_are_refused_before_the_port(store: StateStore, tmp_path: Path, args: dict[str, Any],
                                                     message: str) -> None:
    port = _Port()
    out = await ToolRegistry([CRONJOB_TOOL]).dispatch("cronjob", args, _ctx(store, tmp_path, port))
    assert not out.ok and message in out.content
    assert port.calls == []


async def test_without_a_port_the_model_hears_jobs_are_not_available(store: StateStore, tmp_path: Path) -> None:
    ctx = replace(_ctx(store, tmp_path, None))
    out = await ToolRegistry([CRONJOB_TOOL]).dispatch(
        "cronjob", {"action": "create", "schedule": "every 1h", "prompt": "x"}, ctx)
    assert not out.ok and "not available" in out.content
    assert CRONJOB_TOOL.toolset == "cron"
