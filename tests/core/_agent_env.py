"""A real agent runtime for core tests: a state.db file, FakeOpenAI over HTTP, real tools."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core import AgentRuntime, AgentSettings, TurnRequest
from core.llm import ModelClient, ModelSettings
from core.tools import Tool, ToolContext, ToolError, ToolRegistry, builtin_tools
from gateway.routing.session_index import rebind_in_transaction
from storage import StateStore
from tests.fakes.openai_server import FakeOpenAI

KEY = "agent:main:api-server:dm:alice"


def make_client(fake: FakeOpenAI, *, model: str = "fake-model", auxiliary: str | None = None) -> ModelClient:
    return ModelClient(
        ModelSettings(base_url=fake.base_url, model=model, auxiliary_model=auxiliary, max_retries=2,
                      backoff_base=0.0, backoff_max=0.0, timeout=30)
    )


def make_runtime(
    store: StateStore,
    client: ModelClient,
    home: Path,
    *,
    tools: Iterable[Tool] | None = None,
    **settings: Any,
) -> AgentRuntime:
    """A runtime whose compression re-points chat keys in the gateway's real session index."""
    defaults: dict[str, Any] = {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0}
    defaults.update(settings)
    registry = ToolRegistry(tools) if tools is not None else None
    return AgentRuntime(store, client, AgentSettings(**defaults), home=home, registry=registry,
                        rebind_op=rebind_in_transaction)


async def new_session(store: StateStore, session_id: str = "s1", *, title: str | None = None,
                      key: str | None = KEY) -> str:
    """A session, bound to ``key`` in the session index as the gateway would (None: left unbound)."""
    await store.create_session(session_id, "api-server")
    if title:
        await store.set_session_title(session_id, title)
    if key is not None:
        await store.write(lambda conn: rebind_in_transaction(conn, key, session_id))
    return session_id


def bound_session(db: Path, key: str = KEY) -> str | None:
    """The session id the index binds ``key`` to, read straight from state.db."""
    rows = db_rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
    return str(rows[0][0]) if rows else None


def request(text: str, session_id: str = "s1", *, platform: str = "api-server") -> TurnRequest:
    return TurnRequest(session_id=session_id, session_key=KEY, platform=platform, chat_type="dm", text=text,
                       user_id="alice")


def db_messages(db: Path, session_id: str) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            "SELECT role, content, tool_call_id, tool_calls, tool_name FROM messages WHERE session_id = ? ORDER BY id",
            (session_id,),
        ).fetchall()
    out = []
    for r in rows:
        d = dict(r)
        if d["tool_calls"]:
            d["tool_calls"] = json.loads(d["tool_calls"])
        out.append(d)
    return out


def db_rows(db: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return [tuple(r) for r in conn.execute(sql, params)]


def assert_consistent(messages: list[Mapping[str, Any]]) -> None:
    """Every assistant tool call is followed by exactly its results, before anything else."""
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            answered = []
            while i < len(messages) and messages[i]["role"] == "tool":
                answered.append(messages[i]["tool_call_id"])
                i += 1
            assert sorted(answered) == sorted(ids), (ids, answered)


# ----------------------------------------------------------- small test tools


async def _echo(args: Mapping[str, Any], ctx: ToolContext) -> str:
    return f"echoed {args['text']}"


async def _fail(args: Mapping[str, Any], ctx: ToolContext) -> str:
    raise ToolError("the disk is on fire; try another path")


async def _crash(args: Mapping[str, Any], ctx: ToolContext) -> str:
    raise RuntimeError("boom")


ECHO = Tool("echo", "Echo text back.", {"type": "object", "properties": {"text": {"type": "string"}},
                                         "required": ["text"], "additionalProperties": False}, _echo)
FAIL = Tool("fail", "Always refuses.", {"type": "object", "properties": {}}, _fail)
CRASH = Tool("crash", "Has a bug.", {"type": "object", "properties": {}}, _crash, toolset="buggy")


def sample_tools() -> list[Tool]:
    return [ECHO, FAIL, CRASH, *builtin_tools()]
