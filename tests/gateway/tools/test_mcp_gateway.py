"""MCP servers in the daemon: config (``${NAME}``), /tools, a tool call in a real turn, secrets kept
out of the log, ``hermes-gateway tools`` against a running and a stopped daemon, no orphans."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import structlog
from typer.testing import CliRunner

from adapters.base import ChatType
from gateway import logs
from gateway.cli.app import app
from gateway.config import load_config, mcp_specs
from gateway.errors import EX_CONFIG, ConfigError
from gateway.logs import configure_logging, register_secrets
from tests.core.tools.mcp._servers import SERVER
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import Running, run_gateway, write_config

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1"}
TOKEN = "mcp-tok-5f4e3d2c1b0a"
WAIT = 30.0


def _servers(**extra: Any) -> dict[str, Any]:
    return {
        "fake": {"command": sys.executable, "args": [SERVER, "--say-env", "SERVICE_TOKEN"],
                 "env": {"SERVICE_TOKEN": "${MCP_TOKEN}"}, "timeout": 5},
        "dead": {"command": sys.executable, "args": [SERVER, "--crash-at-start"]},
        **extra,
    }


@pytest.fixture(autouse=True)
def logging_sandbox() -> Iterator[None]:
    """configure_logging and the CLI's quiet logs (to a stderr CliRunner closes) are process-wide:
    put them back for the tests that follow."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    secrets = set(logs._secrets)
    try:
        yield
    finally:
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)
        logs.forget_secrets()
        register_secrets(secrets)


async def _until_ready(run: Running, name: str = "fake", states: tuple[str, ...] = ("ready",)) -> None:
    mcp = run.gateway.services.mcp if run.gateway.services else None
    assert mcp is not None
    server = mcp.server(name)
    assert server is not None
    for _ in range(int(WAIT / 0.05)):
        if server.state in states and (server.state == "ready" or server.last_error):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never became ready: {mcp.status()}")


async def _ask(run: Running, text: str, *, chat_type: ChatType = ChatType.DM) -> str:
    before = len(run.chat.sent)
    await run.chat.say(text, chat_type=chat_type, chat="room" if chat_type is not ChatType.DM else None)
    sent = await run.chat.wait_sent(before + 1, timeout=WAIT)
    return sent[before].text


def _last_tool_result(fake: FakeOpenAI) -> str:
    return str([m for m in fake.chat_requests[-1].body["messages"] if m["role"] == "tool"][-1]["content"])


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


# ------------------------------------------------------------------ config


def test_dollar_names_resolve_from_dotenv_and_an_unknown_one_names_server_and_key(tmp_path: Path) -> None:
    home = tmp_path / "h"
    write_config(home, {"mcp_servers": {"gh": {"url": "https://mcp.example/mcp",
                                               "headers": {"Authorization": "Bearer ${GH_TOKEN}"}}}},
                 {"GH_TOKEN": TOKEN})
    [spec] = mcp_specs(load_config(home, environ={}).settings.mcp_servers, load_config(home, environ={}).env)
    assert spec.headers == {"Authorization": f"Bearer {TOKEN}"}
    write_config(home, {"mcp_servers": {"gh": {"command": "srv", "env": {"API_KEY": "x-${NOPE}-${GH_TOKEN}"}}}},
                 {"GH_TOKEN": TOKEN})
    with pytest.raises(ConfigError) as caught:
        load_config(home, environ={})
    message = str(caught.value)
    assert "mcp_servers.gh.env.API_KEY" in message and "${NOPE}" in message
    assert TOKEN not in message


# ------------------------------------------------------------------ the daemon


async def test_tools_command_and_an_mcp_call_in_a_real_turn(gateway_home: Path, fake_openai: FakeOpenAI,
                                                           logging_sandbox: None,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("debug", "json")
    config = {"mcp_servers": _servers(), "agent": {"toolsets": {"testchat": {"disabled": ["mcp:dead"]}}}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config,
                           env={**ALLOW, "MCP_TOKEN": TOKEN}) as run:
        await _until_ready(run)
        await _until_ready(run, "dead", ("failed",))
        listing = await _ask(run, "/tools")
        assert "mcp:fake: mcp_fake_echo, mcp_fake_noop" in listing
        assert "memory: memory" in listing
        assert "• fake [stdio]: ready (8 tools)" in listing
        assert "• dead [stdio]: failed to start, retrying" in listing
        assert "cannot start: no database" in listing
        assert "its toolset is disabled on testchat" in listing

        fake_openai.reply_tool_calls([{"name": "mcp_fake_echo", "arguments": {"text": "through MCP"}},
                                      {"name": "mcp_fake_env", "arguments": {"name": "SERVICE_TOKEN"}}])
        fake_openai.reply("done")
        assert await _ask(run, "use the tools") == "done"
        tool_results = [m for m in fake_openai.chat_requests[-1].body["messages"] if m["role"] == "tool"]
        assert [m["content"] for m in tool_results] == ["through MCP", "[redacted]"]
        names = {t["function"]["name"] for t in fake_openai.chat_requests[-1].body["tools"]}
        assert {"mcp_fake_echo", "memory"} <= names
        children = _children()
        assert children
        # The daemon's redactor knows the resolved value too, wherever else it might turn up.
        structlog.get_logger("hermes.test").warning("test.leak", value=f"token {TOKEN} here")
    # Shutdown: no MCP child is left behind.
    assert not (children & _children())
    out = capsys.readouterr().out
    assert TOKEN not in out and "token [redacted] here" in out
    assert any(e.get("event") == "mcp.stderr" and "SERVICE_TOKEN=[redacted]" in e.get("line", "")
               for e in map(json.loads, filter(lambda line: line.startswith("{"), out.splitlines())))


async def test_group_chats_and_a_server_that_hangs(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    config = {"mcp_servers": {"fake": {"command": sys.executable, "args": [SERVER], "timeout": 0.5}}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config, env=ALLOW) as run:
        await _until_ready(run)
        fake_openai.reply_tool_calls([{"name": "mcp_fake_slow", "arguments": {"seconds": 30}}]).reply("gave up")
        assert await _ask(run, "be slow", chat_type=ChatType.GROUP) == "gave up"
        assert "did not answer within 0.5 s" in _last_tool_result(fake_openai)
        offered = {t["function"]["name"] for t in fake_openai.chat_requests[-1].body["tools"]}
        assert "mcp_fake_echo" in offered and "read_file" in offered
        assert "terminal" not in offered and "write_file" not in offered  # a group: tools.groups
        # The daemon keeps serving, and so does the server.
        assert "mcp:fake:" in await _ask(run, "/tools", chat_type=ChatType.GROUP)
        fake_openai.reply_tool_calls([{"name": "mcp_fake_echo", "arguments": {"text": "fine"}}]).reply("ok")
        assert await _ask(run, "again") == "ok"
        assert _last_tool_result(fake_openai) == "fine"
        assert {"terminal", "write_file"} <= {t["function"]["name"] for t in fake_openai.chat_requests[-1].body["tools"]}
        # A crash mid-call: a tool error for the model, the daemon serves on, the server comes back.
        fake_openai.reply_tool_calls([{"name": "mcp_fake_crash", "arguments": {}}]).reply("it crashed")
        assert await _ask(run, "crash it") == "it crashed"
        assert "stopped while running crash" in _last_tool_result(fake_openai)
        await _until_ready(run)
        fake_openai.reply_tool_calls([{"name": "mcp_fake_echo", "arguments": {"text": "back"}}]).reply("ok")
        assert await _ask(run, "and now?") == "ok"
        assert _last_tool_result(fake_openai) == "back"


# ------------------------------------------------------------------ the command line


def _cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["tools", *args])


async def test_tools_cli_asks_the_running_daemon(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    config = {"mcp_servers": {"fake": {"command": sys.executable, "args": [SERVER]}}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config, env=ALLOW) as run:
        await _until_ready(run)
        result = await asyncio.to_thread(_cli, "--home", str(gateway_home), "--platform", "telegram")
        assert result.exit_code == 0, result.output
        assert "Tools for telegram, dm:" in result.output and "mcp_fake_echo" in result.output
        assert "• fake [stdio]: ready (8 tools)" in result.output
        result = await asyncio.to_thread(_cli, "--home", str(gateway_home), "--json")
        data, _ = json.JSONDecoder().raw_decode(result.stdout)
        assert data["running"] is True and {s["name"]: s["state"] for s in data["servers"]} == {"fake": "ready"}


def test_tools_cli_without_a_daemon_reads_the_config(tmp_path: Path) -> None:
    home = tmp_path / "h"
    write_config(home, {"mcp_servers": {"fake": {"command": "srv"}, "remote": {"url": "http://x/mcp",
                                                                                "enabled": False}},
                        "agent": {"toolsets": {"telegram": {"disabled": ["memory"]}}}})
    result = _cli("--home", str(home), "--platform", "telegram", "--group")
    assert result.exit_code == 0, result.output
    assert "not running" in result.output
    assert "• fake [stdio]: not running (daemon stopped)" in result.output
    assert "• remote [http]: disabled (enabled: false)" in result.output
    assert "the toolset memory is disabled on telegram" in result.output
    assert "terminal (terminal): off in groups and channels (tools.groups.terminal)" in result.output
    assert "(tools.groups.file_writes)" in result.output and "write_file" in result.output
    assert "web_search (web): no search service is configured" in result.output
    write_config(home, {"mcp_servers": {"fake": {"command": "srv", "env": {"K": "${MISSING_ONE}"}}}})
    result = _cli("--home", str(home))
    assert result.exit_code == EX_CONFIG and "mcp_servers.fake.env.K" in result.output
