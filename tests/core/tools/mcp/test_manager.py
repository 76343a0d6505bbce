"""McpManager against real stdio MCP servers: the SDK one of the suite and a broken one."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path

import psutil
import pytest

from core.tools import ToolContext, ToolError, ToolRegistry
from core.tools.mcp import EMPTY_SCHEMA, McpManager, McpServerSpec
from storage import StateStore

from ._servers import fake, malformed

Factory = Callable[[Iterable[McpServerSpec]], McpManager]


@pytest.fixture
async def managers() -> AsyncIterator[Factory]:
    made: list[McpManager] = []

    def make(specs: Iterable[McpServerSpec]) -> McpManager:
        made.append(McpManager(specs, backoff=0.1, backoff_max=0.4))
        return made[-1]

    yield make
    for manager in made:
        await manager.aclose()


@pytest.fixture
def ctx(store: StateStore, tmp_path: Path) -> ToolContext:
    return ToolContext(session_id="s1", platform="api-server", home=tmp_path, store=store)


async def _ready(specs: Iterable[McpServerSpec], managers: Factory) -> McpManager:
    manager = managers(specs)
    await manager.start()
    assert await manager.wait_ready(30), manager.status()
    return manager


async def _until(check: Callable[[], bool], within: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_tools_are_offered_with_names_schemas_and_descriptions(managers: Factory) -> None:
    manager = await _ready([fake("files-1")], managers)
    tools = {t.name: t for t in manager.tools()}
    assert set(tools) == {f"mcp_files-1_{n}" for n in ("echo", "noop", "slow", "freeze", "crash", "fail", "env",
                                                           "header")}
    echo = tools["mcp_files-1_echo"]
    assert echo.toolset == "mcp:files-1"
    assert echo.parameters["properties"]["text"]["type"] == "string"
    assert echo.parameters["required"] == ["text"]
    assert "Return the text unchanged" in echo.description
    [status] = manager.status()
    assert status.state == "ready" and "mcp_files-1_echo" in status.tools and status.last_error is None


async def test_a_call_returns_text_and_an_error_result_is_a_tool_error(managers: Factory,
                                                                       ctx: ToolContext) -> None:
    manager = await _ready([fake()], managers)
    registry = ToolRegistry(manager.tools())
    outcome = await registry.dispatch("mcp_t_echo", '{"text": "héllo"}', ctx)
    assert (outcome.ok, outcome.content) == (True, "héllo")
    outcome = await registry.dispatch("mcp_t_fail", {"text": "the disk is full"}, ctx)
    assert not outcome.ok and "the disk is full" in outcome.content and "mcp_t_fail" not in outcome.content


async def test_a_hang_times_out_and_the_next_call_works(managers: Factory) -> None:
    manager = await _ready([fake(timeout=0.5)], managers)
    server = manager.server("t")
    assert server is not None
    with pytest.raises(ToolError, match=r"the MCP server t did not answer within 0.5 s"):
        await server.call("slow", {"seconds": 30})
    assert await server.call("echo", {"text": "still here"}) == "still here"


async def test_a_hung_server_is_restarted_after_a_timeout(managers: Factory) -> None:
    manager = await _ready([fake(timeout=0.5)], managers)
    server = manager.server("t")
    assert server is not None
    with pytest.raises(ToolError, match=r"did not answer within 0\.5 s"):
        await server.call("freeze", {"seconds": 60})
    # The timeout asks for a ping at once; an unanswered ping means a hung server: restarted.
    await _until(lambda: server.restarts >= 1 and server.state == "ready")
    assert await server.call("echo", {"text": "thawed out"}) == "thawed out"


async def test_a_long_call_on_a_busy_server_is_not_taken_for_a_hang() -> None:
    # Pinged every 0.1 s while idle, a hang after 0.3 s without an answer; a call that blocks the
    # server for 1 s (within its 10 s) is no reason to restart it.
    manager = McpManager([fake(timeout=10)], backoff=0.1, ping_interval=0.1, ping_timeout=0.3)
    await manager.start()
    try:
        assert await manager.wait_ready(30)
        server = manager.server("t")
        assert server is not None
        assert await server.call("freeze", {"seconds": 1}) == "thawed"
        assert server.restarts == 0 and server.state == "ready"
    finally:
        await manager.aclose()


async def test_a_crash_mid_call_is_a_tool_error_and_the_server_comes_back(managers: Factory) -> None:
    manager = await _ready([fake()], managers)
    server = manager.server("t")
    assert server is not None
    pid_before = _children()
    with pytest.raises(ToolError, match=r"stopped while running crash.*being restarted"):
        await server.call("crash", {})
    with pytest.raises(ToolError, match="not available right now"):
        await server.call("echo", {"text": "too soon"})
    await _until(lambda: server.state == "ready")
    assert server.restarts >= 1
    assert "its last output: fatal: out of coffee" in (server.status().last_error or "")
    tools = {t.name: t for t in manager.tools()}
    assert await server.call("echo", {"text": "back"}) == "back"
    assert "mcp_t_echo" in tools
    assert not (pid_before & _children()), "the crashed child was replaced"


async def test_a_server_that_dies_at_start_is_failed_with_its_reason_and_retried(managers: Factory,
                                                                                 tmp_path: Path) -> None:
    manager = managers([fake("dead", "--crash-at-start"), fake("once", "--crash-once", str(tmp_path / "m"))])
    await manager.start()
    dead = manager.server("dead")
    assert dead is not None
    await _until(lambda: dead.restarts >= 2)
    status = {s.name: s for s in manager.status()}["dead"]
    assert status.state == "failed"
    assert status.last_error is not None and "cannot start: no database" in status.last_error
    assert not [t for t in manager.tools() if t.toolset == "mcp:dead"]
    once = manager.server("once")
    assert once is not None
    await _until(lambda: once.state == "ready")  # the retry succeeded
    assert await once.call("echo", {"text": "up"}) == "up"


async def test_a_missing_command_fails_with_the_reason(managers: Factory) -> None:
    manager = managers([McpServerSpec("nope", command="/nonexistent/mcp-server")])
    await manager.start()
    await _until(lambda: manager.status()[0].last_error is not None)
    assert "No such file" in (manager.status()[0].last_error or "")


async def test_malformed_json_gives_a_clear_error_and_an_invalid_schema_falls_back(managers: Factory) -> None:
    manager = await _ready([malformed()], managers)
    tools = {t.name: t for t in manager.tools()}
    assert tools["mcp_bad_odd_schema"].parameters == EMPTY_SCHEMA
    server = manager.server("bad")
    assert server is not None
    with pytest.raises(ToolError, match="sent a reply that is not valid JSON-RPC"):
        await asyncio.wait_for(server.call("broken", {}), 10)
    await _until(lambda: server.state == "ready" and server.restarts >= 1)


async def test_the_child_gets_its_env_and_none_of_the_daemons_secrets(managers: Factory,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HERMES_TEST_DAEMON_SECRET", "daemon-only-value")
    manager = await _ready([fake(env={"SERVICE_TOKEN": "tok-123456", "MODE": "x"})], managers)
    server = manager.server("t")
    assert server is not None
    assert await server.call("env", {"name": "HERMES_TEST_DAEMON_SECRET"}) == "(unset)"
    assert await server.call("env", {"name": "PATH"}) == os.environ["PATH"]
    # Set in the child, and never shown to the model.
    assert await server.call("env", {"name": "SERVICE_TOKEN"}) == "[redacted]"


async def test_close_leaves_no_child_process(managers: Factory) -> None:
    manager = await _ready([fake("a"), fake("b")], managers)
    children = _children()
    assert len(children) >= 2
    await manager.aclose()
    assert not (children & _children())
    for pid in children:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert {s.state for s in manager.status()} == {"stopped"}
    assert manager.tools() == []


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}
