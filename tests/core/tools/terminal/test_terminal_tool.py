"""The terminal tool with real processes: exit codes, timeouts, groups, output caps, env, approvals."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import psutil
import pytest

from core.tools import ApprovalDecision, ApprovalRequest, ToolContext, ToolOutcome, ToolRegistry
from core.tools.terminal import (
    TerminalSettings,
    kill_all_commands,
    live_command_groups,
    terminal_settings,
    terminal_tool,
)
from storage import StateStore

pytestmark = pytest.mark.timeout(60)


class Approver:
    """Answers every request with ``approved`` and remembers what it was asked."""

    def __init__(self, approved: bool) -> None:
        self.approved = approved
        self.asked: list[ApprovalRequest] = []

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return ApprovalDecision(self.approved, "approved by 42" if self.approved else "denied by 42")


@pytest.fixture
def settings(tmp_path: Path) -> TerminalSettings:
    home = tmp_path / "hermes"
    home.mkdir()
    return replace(terminal_settings(home, timeout=30.0, max_output_kb=4), kill_grace=0.5)


def _ctx(settings: TerminalSettings, store: StateStore, approver: Approver | None = None) -> ToolContext:
    return ToolContext(session_id="s1", platform="telegram", home=settings.home, store=store, user_id="42",
                       approver=approver)


async def _run(settings: TerminalSettings, store: StateStore, command: str, approver: Approver | None = None,
               **args: Any) -> ToolOutcome:
    registry = ToolRegistry([terminal_tool(settings)])
    return await registry.dispatch("terminal", {"command": command, **args}, _ctx(settings, store, approver))


def _gone(pid: int) -> bool:
    """Dead: no such process, or a zombie waiting for its parent (it runs nothing)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


async def _all_gone(pids: list[int], within: float = 3.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(_gone(p) for p in pids):
            return True
        await asyncio.sleep(0.05)
    return all(_gone(p) for p in pids)


def _pids(text: str) -> list[int]:
    return [int(p) for p in re.findall(r"pid=(\d+)", text)]


# ------------------------------------------------------------------ the tool as the model sees it


def test_schema_and_identity(settings: TerminalSettings) -> None:
    tool = terminal_tool(settings)
    assert (tool.name, tool.toolset, tool.tags) == ("terminal", "terminal", ("writes",))
    params = tool.schema()["function"]["parameters"]
    jsonschema.Draft202012Validator.check_schema(params)
    assert params["required"] == ["command"] and set(params["properties"]) == {"command", "timeout"}
    assert "30 s" in tool.description


async def test_exit_codes_and_output(settings: TerminalSettings, store: StateStore) -> None:
    ok = await _run(settings, store, "echo hello; echo oops >&2")
    assert ok.ok and ok.content == "exit code 0\noutput (11 bytes):\nhello\noops\n"
    failed = await _run(settings, store, "echo partial; exit 3")
    assert failed.ok and failed.content.startswith("exit code 3\n") and "partial" in failed.content
    silent = await _run(settings, store, "true")
    assert silent.content == "exit code 0\n(no output)"
    missing = await _run(settings, store, "no-such-command-here")
    assert missing.content.startswith("exit code 127") and "not found" in missing.content
    signalled = await _run(settings, store, "kill -SEGV $$")
    assert signalled.content.startswith("killed by signal SIGSEGV")


async def test_runs_in_the_workspace_created_private(settings: TerminalSettings, store: StateStore) -> None:
    assert not settings.cwd.exists()
    out = await _run(settings, store, "pwd; echo $PWD; touch made.txt")
    assert out.content.split("\n")[2:4] == [str(settings.cwd)] * 2
    assert (settings.cwd / "made.txt").exists()
    assert stat.S_IMODE(settings.cwd.stat().st_mode) == 0o700
    assert settings.cwd == settings.home / "workspace"


async def test_bad_arguments_are_clear(settings: TerminalSettings, store: StateStore) -> None:
    registry = ToolRegistry([terminal_tool(settings)])
    ctx = _ctx(settings, store)
    for args, expected in (({}, "command"), ({"command": "   "}, "empty"), ({"command": "ls", "timeout": -1}, "timeout"),
                           ({"command": "ls", "timeout": "soon"}, "timeout"), ({"command": "a\x00b"}, "NUL")):
        outcome = await registry.dispatch("terminal", args, ctx)
        assert not outcome.ok and expected in outcome.content, (args, outcome.content)


# ------------------------------------------------------------------ time limits and process groups


async def test_timeout_kills_the_whole_group(settings: TerminalSettings, store: StateStore) -> None:
    started = time.monotonic()
    out = await _run(settings, store, "sleep 300 & echo pid=$!; echo pid=$$; sleep 300", timeout=1)
    took = time.monotonic() - started
    assert out.ok and out.content.startswith("killed after 1 s timeout"), out.content
    assert took < 1 + settings.kill_grace + 2
    pids = _pids(out.content)
    assert len(pids) == 2 and await _all_gone(pids)
    assert live_command_groups() == []


async def test_a_command_that_ignores_sigterm_is_killed_after_the_grace(settings: TerminalSettings,
                                                                        store: StateStore) -> None:
    started = time.monotonic()
    out = await _run(settings, store, "trap '' TERM; echo pid=$$; while :; do sleep 0.1; done", timeout=0.5)
    assert out.content.startswith("killed after 0.5 s timeout")
    assert 0.5 + settings.kill_grace - 0.1 < time.monotonic() - started < 5
    assert await _all_gone(_pids(out.content))


async def test_the_models_timeout_is_honoured_and_capped(settings: TerminalSettings, store: StateStore) -> None:
    shorter = await _run(settings, store, "sleep 20", timeout=0.3)
    assert shorter.content.startswith("killed after 0.3 s timeout")
    capped = await _run(replace(settings, timeout=0.5), store, "sleep 20", timeout=100)
    assert capped.content.startswith("killed after 0.5 s timeout")


async def test_background_children_end_with_the_command(settings: TerminalSettings, store: StateStore) -> None:
    started = time.monotonic()
    # one child keeps the output pipe open, one does not: neither may outlive the call or hold it up
    out = await _run(settings, store, "sleep 300 & echo pid=$!; sleep 301 >/dev/null 2>&1 & echo pid=$!; echo done")
    assert time.monotonic() - started < 3
    assert out.content.startswith("exit code 0") and "done" in out.content
    pids = _pids(out.content)
    assert len(pids) == 2 and await _all_gone(pids)


async def test_many_children_and_grandchildren_all_end(settings: TerminalSettings, store: StateStore) -> None:
    out = await _run(settings, store, "for i in $(seq 20); do sleep 300 & done; "
                                      "(sleep 300 & echo pid=$!; wait) & sleep 0.2; jobs -p | sed 's/^/pid=/'")
    pids = _pids(out.content)
    assert out.content.startswith("exit code 0") and len(pids) == 22
    assert await _all_gone(pids)


async def test_a_process_that_leaves_the_group_is_not_contained_but_does_not_hold_the_call(
        settings: TerminalSettings, store: StateStore) -> None:
    # Documented limit: setsid (or a daemon's double fork) escapes the group. The call still returns.
    started = time.monotonic()
    out = await _run(settings, store, "setsid sleep 300 & echo pid=$!; echo done")
    escaped = _pids(out.content)
    try:
        assert out.content.startswith("exit code 0") and "done" in out.content
        assert time.monotonic() - started < 4
    finally:
        for pid in escaped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_cancellation_kills_the_group(settings: TerminalSettings, store: StateStore) -> None:
    marker = settings.cwd / "pids"
    task = asyncio.create_task(_run(settings, store, f"sleep 300 & echo pid=$! > {marker}; echo pid=$$ >> {marker}; "
                                                     "sleep 300"))
    deadline = time.monotonic() + 10
    while not (marker.exists() and len(_pids(marker.read_text())) == 2):
        assert time.monotonic() < deadline and not task.done()
        await asyncio.sleep(0.02)
    pids = _pids(marker.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gone = await _all_gone(pids, within=2.0)
    assert gone, [(p, psutil.Process(p).status(), psutil.Process(p).cmdline()) for p in pids if not _gone(p)]
    assert live_command_groups() == []


async def test_cancellation_while_the_command_starts_leaves_nothing(settings: TerminalSettings,
                                                                    store: StateStore) -> None:
    for attempt in range(10):
        marker = settings.cwd / f"pids-{attempt}"
        task = asyncio.create_task(_run(settings, store, f"sleep 300 & echo pid=$! > {marker}; wait"))
        for _ in range(attempt):  # cancel at a different point of the start-up each time
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.2)
        if marker.exists():
            assert await _all_gone(_pids(marker.read_text()), within=2.0)
    assert live_command_groups() == []


async def test_kill_all_commands_ends_every_running_command(settings: TerminalSettings, store: StateStore) -> None:
    tasks = [asyncio.create_task(_run(settings, store, "echo pid=$$; sleep 300")) for _ in range(2)]
    deadline = time.monotonic() + 10
    while len(live_command_groups()) < 2:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    groups = live_command_groups()
    assert await kill_all_commands(grace=1.0) == 2
    results = await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert all(r.content.startswith("killed by signal SIGTERM") for r in results)
    assert await _all_gone(groups)
    assert await kill_all_commands() == 0


# ------------------------------------------------------------------ output


async def test_a_gigabyte_of_output_is_capped_quickly_in_bounded_memory(settings: TerminalSettings,
                                                                       store: StateStore) -> None:
    me = psutil.Process()
    before = me.memory_info().rss
    peak = before
    stop = asyncio.Event()

    lags: list[float] = []

    async def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, me.memory_info().rss)
            asked = time.monotonic()
            await asyncio.sleep(0.01)
            lags.append(time.monotonic() - asked - 0.01)

    sampler = asyncio.create_task(sample())
    started = time.monotonic()
    out = await _run(settings, store, "head -c 1073741824 /dev/zero; echo never")
    took = time.monotonic() - started
    stop.set()
    await sampler
    assert out.ok and out.content.startswith("killed: it printed more than 64 MiB"), out.content[:200]
    assert "bytes omitted" in out.content and "binary output" in out.content and "\x00" not in out.content
    assert len(out.content) < settings.max_output_bytes + 500
    assert took < 20
    assert peak - before < 32 * 2**20, f"RSS grew by {(peak - before) / 2**20:.1f} MiB"
    assert max(lags, default=0.0) < 0.2  # the loop keeps serving (a few ms measured; generous for a shared machine)


async def test_long_output_keeps_its_head_and_tail(settings: TerminalSettings, store: StateStore) -> None:
    out = await _run(settings, store, "seq 1 100000")
    total = sum(len(f"{i}\n") for i in range(1, 100001))
    lines = out.content.split("\n")
    assert lines[0] == "exit code 0" and lines[1] == f"output ({total:,} bytes):"
    assert lines[2:5] == ["1", "2", "3"] and lines[-2:] == ["100000", ""]
    omitted = [line for line in lines if "bytes omitted" in line]
    assert len(omitted) == 1 and omitted[0] == f"… {total - settings.max_output_bytes:,} bytes omitted …"


async def test_yes_forever_is_stopped_by_the_ceiling(settings: TerminalSettings, store: StateStore) -> None:
    out = await _run(replace(settings, output_ceiling_bytes=4 * 2**20), store, "yes")
    assert out.content.startswith("killed: it printed more than 4 MiB")
    assert "y\ny\n" in out.content and "binary" not in out.content


async def test_stdin_is_empty(settings: TerminalSettings, store: StateStore) -> None:
    started = time.monotonic()
    cat = await _run(settings, store, "cat")
    assert cat.content == "exit code 0\n(no output)"
    read = await _run(settings, store, 'read line; echo "status=$? line=[$line]"')
    assert "status=1 line=[]" in read.content
    assert time.monotonic() - started < 5


async def test_binary_output_is_readable_and_flagged(settings: TerminalSettings, store: StateStore) -> None:
    out = await _run(settings, store, r"printf 'a\000b\001c\033[31mred\033[0m\r\nnext\r10%\r20%\n'; "
                                      "head -c 2000 /dev/urandom")
    assert "binary output" in out.content
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", out.content)
    assert out.content.split("\n")[2].startswith("a\ufffdb\ufffdcred")
    text = await _run(settings, store, r"printf 'caf\303\251 \342\234\223\n'")
    assert text.content.endswith("café ✓\n") and "binary" not in text.content


async def test_a_multibyte_character_cut_at_the_edge_is_dropped_not_garbled(settings: TerminalSettings,
                                                                           store: StateStore) -> None:
    out = await _run(replace(settings, max_output_bytes=100), store, "python3 -c \"print('é' * 500, end='')\"")
    assert "\ufffd" not in out.content and "bytes omitted" in out.content


# ------------------------------------------------------------------ environment


async def test_secrets_do_not_reach_the_command(settings: TerminalSettings, store: StateStore,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "tok-123")
    monkeypatch.setenv("SOME_NAME_FROM_DOTENV", "dotenv-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-daemon")
    monkeypatch.setenv("HERMES_CONTROL_KEY", "ctl")
    monkeypatch.setenv("GITHUB_TOKEN", "gh-passed")
    monkeypatch.setenv("PLAIN_SETTING", "plain")
    monkeypatch.setenv("HERMES_HOME", str(settings.home))
    configured = replace(settings, secret_names=frozenset({"SOME_NAME_FROM_DOTENV", "DOTENV_ONLY", "DOTENV_PASSED"}),
                         pass_env=frozenset({"GITHUB_TOKEN", "DOTENV_PASSED"}),
                         dotenv={"DOTENV_ONLY": "kept-away", "DOTENV_PASSED": "handed-over"})
    out = await _run(configured, store, "env")
    seen = dict(line.split("=", 1) for line in out.content.split("\n")[2:] if "=" in line)
    for absent in ("TELEGRAM_BOT_TOKEN", "SOME_NAME_FROM_DOTENV", "OPENAI_API_KEY", "HERMES_CONTROL_KEY",
                   "DOTENV_ONLY"):
        assert absent not in seen
    assert "tok-123" not in out.content and "sk-daemon" not in out.content and "kept-away" not in out.content
    assert seen["GITHUB_TOKEN"] == "gh-passed" and seen["DOTENV_PASSED"] == "handed-over"
    assert seen["PLAIN_SETTING"] == "plain" and seen["HERMES_HOME"] == str(settings.home)
    assert seen["PWD"] == str(settings.cwd) and seen["PATH"] == os.environ["PATH"]


@pytest.mark.parametrize("daemon_has", [None, "/somewhere/else"])
async def test_hermes_home_is_the_home_the_command_was_checked_against(
        settings: TerminalSettings, store: StateStore, monkeypatch: pytest.MonkeyPatch, daemon_has: str | None) -> None:
    # classify reads "$HERMES_HOME/workspace/x" as inside the workspace (not asked): the command must
    # see that home, not "" (a daemon started with the default home) nor another value
    if daemon_has is None:
        monkeypatch.delenv("HERMES_HOME", raising=False)
    else:
        monkeypatch.setenv("HERMES_HOME", daemon_has)
    out = await _run(settings, store, 'echo "[$HERMES_HOME]"')
    assert out.ok and f"[{settings.home}]" in out.content, out.content


async def test_home_is_set_when_the_daemon_has_none(settings: TerminalSettings, store: StateStore,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # classify reads "$HOME/..." as the daemon's home directory: "" would make "$HOME/x" "/x"
    monkeypatch.delenv("HOME", raising=False)
    out = await _run(settings, store, 'echo "[$HOME]"')
    assert out.ok and f"[{Path.home()}]" in out.content, out.content


# ------------------------------------------------------------------ approvals


async def test_a_dangerous_command_is_refused_when_nobody_can_be_asked(settings: TerminalSettings,
                                                                       store: StateStore) -> None:
    out = await _run(settings, store, "touch ran.txt; sudo true")
    assert not out.ok and out.content.startswith("Error: Not done: runs a command as another user (sudo)")
    assert not (settings.cwd / "ran.txt").exists()


async def test_an_approved_command_runs(settings: TerminalSettings, store: StateStore) -> None:
    approver = Approver(True)
    command = "mkdir -p sub && chmod -R 777 sub && touch ran.txt"
    out = await _run(settings, store, command, approver)
    assert out.ok and out.content.startswith("exit code 0")
    assert (settings.cwd / "ran.txt").exists()
    assert approver.asked == [ApprovalRequest(tool="terminal", action=command,
                                              reason="chmod -R 777 (makes every file writable by everyone)",
                                              pattern=command)]


async def test_a_denied_command_does_not_run(settings: TerminalSettings, store: StateStore) -> None:
    approver = Approver(False)
    out = await _run(settings, store, "touch ran.txt; git push --force", approver)
    assert not out.ok and "did not approve" in out.content and "denied by 42" in out.content
    assert not (settings.cwd / "ran.txt").exists()
    assert approver.asked[0].reason.startswith("force-push")


async def test_harmless_commands_ask_nobody(settings: TerminalSettings, store: StateStore) -> None:
    approver = Approver(False)
    out = await _run(settings, store, "mkdir -p build && rm -rf ./build && echo ok", approver)
    assert out.ok and approver.asked == []


async def test_an_unreadable_command_is_asked_about(settings: TerminalSettings, store: StateStore) -> None:
    approver = Approver(False)
    out = await _run(settings, store, "echo 'unbalanced", approver)
    assert not out.ok and approver.asked[0].reason == "could not be parsed to check it"


async def test_commands_run_side_by_side(settings: TerminalSettings, store: StateStore) -> None:
    started = time.monotonic()
    results = await asyncio.gather(*(_run(settings, store, f"sleep 0.5; echo {i}") for i in range(4)))
    assert [r.content.split("\n")[-2] for r in results] == ["0", "1", "2", "3"]
    assert time.monotonic() - started < 2.5
