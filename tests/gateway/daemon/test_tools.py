"""The tools that act, as the daemon builds them from config: through the HTTP API, FakeOpenAI
asking for real tool calls, real processes and files, state.db on disk."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import psutil
import pytest

from tests.core._agent_env import db_messages, db_rows
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway


def _tool_results(db: Path) -> list[str]:
    (sid,) = db_rows(db, "SELECT session_id FROM gateway_session_index")[0]
    return [str(m["content"]) for m in db_messages(db, sid) if m["role"] == "tool"]


async def test_a_command_runs_in_the_workspace_without_the_daemons_secrets(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "hermes"
    # what systemd's EnvironmentFile or a shell would have put in the daemon's own environment
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "discord-secret")
    monkeypatch.setenv("OPENROUTER_API_KEY", "or-secret")
    command = ('printf made > made.txt; echo "token=[$TELEGRAM_BOT_TOKEN] key=[$MY_SERVICE_KEY] ok=[$PASSED_ON]"; '
               'env')
    fake_openai.reply_tool_calls([{"id": "t1", "name": "terminal", "arguments": {"command": command}}])
    fake_openai.reply("Done.")
    env = {"TELEGRAM_BOT_TOKEN": "123:secret-token", "MY_SERVICE_KEY": "sk-hidden", "PASSED_ON": "visible"}
    config = {"tools": {"terminal": {"pass_env": ["PASSED_ON"]}}}
    async with run_gateway(home, fake_openai.base_url, config=config, env=env) as gw:
        assert (await gw.ask("make a file")).status_code == 200
    (result,) = _tool_results(gw.db_path)
    assert "token=[] key=[] ok=[visible]" in result
    for secret in ("secret-token", "sk-hidden", "discord-secret", "or-secret"):
        assert secret not in result
    assert (home / "workspace" / "made.txt").read_text() == "made"


async def test_file_tools_work_in_the_workspace_and_refuse_to_read_outside_it(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = tmp_path / "hermes"
    fake_openai.reply_tool_calls([
        {"id": "w1", "name": "write_file", "arguments": {"path": "notes/plan.md", "content": "step one\nstep two\n"}},
        {"id": "r1", "name": "read_file", "arguments": {"path": "../.env"}},
        {"id": "r2", "name": "read_file", "arguments": {"path": "/etc/passwd"}},
    ])
    fake_openai.reply("Written.")
    async with run_gateway(home, fake_openai.base_url, env={"SOME_TOKEN": "t0ps3cret"}) as gw:
        assert (await gw.ask("write my plan")).status_code == 200
    wrote, dotenv, passwd = _tool_results(gw.db_path)
    assert "plan.md" in wrote and not wrote.startswith("Error")
    assert (home / "workspace" / "notes" / "plan.md").read_text() == "step one\nstep two\n"
    assert "t0ps3cret" not in dotenv and dotenv.startswith("Error:")
    assert "root:" not in passwd and passwd.startswith("Error:")


async def test_a_tool_result_is_stored_within_max_tool_result_kb_and_says_so(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = tmp_path / "hermes"
    fake_openai.reply_tool_calls([{"id": "t1", "name": "terminal", "arguments": {"command": "seq 1 100000"}}])
    fake_openai.reply("Long.")
    async with run_gateway(home, fake_openai.base_url, config={"agent": {"max_tool_result_kb": 4}}) as gw:
        assert (await gw.ask("count")).status_code == 200
    (result,) = _tool_results(gw.db_path)
    assert len(result) <= 4096
    assert "bytes omitted" in result and result.rstrip().endswith("100000")  # the tail survives the cap
    # what the model saw is what was stored
    sent = [m for m in fake_openai.chat_requests[1].body["messages"] if m["role"] == "tool"]
    assert sent[0]["content"] == result


async def test_stopping_the_daemon_kills_a_running_command_and_its_children(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = tmp_path / "hermes"
    command = "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; wait"
    fake_openai.reply_tool_calls([{"id": "t1", "name": "terminal", "arguments": {"command": command}}])
    fake_openai.reply("never reached")
    pids: list[int] = []
    async with run_gateway(home, fake_openai.base_url, config={"gateway": {"drain_timeout": 0.5}}) as gw:
        asking = asyncio.create_task(gw.ask("run it"))
        workspace = home / "workspace"
        for _ in range(500):
            # the shell writes them with `echo … >`: a file exists (empty) before it holds the pid
            if all((workspace / name).exists() and (workspace / name).read_text().strip()
                   for name in ("shell.pid", "child.pid")):
                break
            await asyncio.sleep(0.02)
        pids = [int((workspace / name).read_text()) for name in ("shell.pid", "child.pid")]
        assert all(psutil.pid_exists(pid) for pid in pids)
    asking.cancel()
    for pid in pids:
        alive = psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        assert not alive, f"{pid} outlived the daemon"
    assert os.getpgid(os.getpid())  # the test's own group is untouched


async def test_stop_kills_the_running_command_and_the_chat_goes_on(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "hermes"
    command = "sleep 300 & echo $! > child.pid; echo $$ > shell.pid; wait"
    fake_openai.reply_tool_calls([{"id": "t1", "name": "terminal", "arguments": {"command": command}}])
    fake_openai.reply("Still here.")  # the stopped turn asks nothing more
    async with run_gateway(home, fake_openai.base_url) as gw:
        asking = asyncio.create_task(gw.ask("run it"))
        workspace = home / "workspace"
        for _ in range(500):
            # the shell writes them with `echo … >`: a file exists (empty) before it holds the pid
            if all((workspace / name).exists() and (workspace / name).read_text().strip()
                   for name in ("shell.pid", "child.pid")):
                break
            await asyncio.sleep(0.02)
        pids = [int((workspace / name).read_text()) for name in ("shell.pid", "child.pid")]
        assert (await gw.ask("/stop")).status_code == 200
        await asyncio.wait_for(asking, 30)
        for pid in pids:
            for _ in range(100):
                if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError(f"{pid} outlived /stop")
        after = await gw.ask("are you there?")
        assert after.status_code == 200 and after.json()["choices"][0]["message"]["content"] == "Still here."


def test_the_heavy_tool_libraries_load_only_when_used() -> None:
    """The MCP SDK (~20 MB with starlette) and trafilatura (lxml, dateparser) are not loaded by a
    daemon that has no MCP server and has fetched no page: the memory lead is kept."""
    import subprocess
    import sys

    code = ("import sys, gateway.daemon.runner, gateway.cli; "
            "print(sorted(m for m in ('mcp', 'starlette', 'trafilatura', 'lxml', 'dateparser') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
