"""The ``terminal`` tool: check the command against the dangerous list, ask if needed, run it."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from .._args import Args
from .._base import Tool, ToolContext, ToolError
from ..approval import ApprovalRequest, require_approval
from ._env import child_env
from ._process import CommandResult, run_command
from ._settings import TerminalSettings
from .dangerous import classify

log = structlog.get_logger("hermes.tools.terminal")

__all__ = ["terminal_tool"]

#: a command longer than this is no command a person could check
_MAX_COMMAND_CHARS = 20_000
#: shorter commands are checked on the event loop (~0.1 ms per 100 characters); longer ones in a thread
_CHECK_INLINE_CHARS = 2_000

_DESCRIPTION = (
    "Run a shell command (bash) in your workspace folder and get its exit code and output (stdout and "
    "stderr together; long output is cut to its start and end). Each call is a fresh shell: use 'cd dir && "
    "cmd' in one command. There is no input (stdin is empty) and no terminal, so use non-interactive flags "
    "(-y, --no-pager). The command and anything it started in the background are killed when it ends or "
    "after {timeout:g} s (set 'timeout' lower for quick commands); do not start servers meant to keep "
    "running. Destructive commands (sudo, deleting outside the workspace, force-push, ...) wait for the "
    "user's approval."
)


def terminal_tool(settings: TerminalSettings) -> Tool:
    """The ``terminal`` tool (toolset "terminal") running commands as ``settings`` say."""

    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> str:
        return await _terminal(args, ctx, settings)

    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command to run."},
            "timeout": {"type": "number", "exclusiveMinimum": 0,
                        "description": f"Seconds before it is killed (at most {settings.timeout:g})."},
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    return Tool(name="terminal", description=_DESCRIPTION.format(timeout=settings.timeout),
                parameters=parameters, handler=handler, toolset="terminal", tags=("writes",),
                # the capture is already cut to max_output_bytes; the registry must not cut its tail off
                max_result_chars=settings.max_output_bytes + 2_000)


async def _terminal(args: Mapping[str, Any], ctx: ToolContext, settings: TerminalSettings) -> str:
    a = Args(args)
    command = a.required_text("command", max_chars=_MAX_COMMAND_CHARS)
    if not command.strip():
        raise ToolError("'command' is empty.")
    if "\x00" in command:
        raise ToolError("'command' contains a NUL character.")
    timeout = _timeout(args.get("timeout"), settings.timeout)
    if len(command) < _CHECK_INLINE_CHARS:
        reason = classify(command, workspace=settings.cwd, home=settings.home)
    else:  # a long command takes milliseconds to read: not on the event loop
        reason = await asyncio.to_thread(classify, command, workspace=settings.cwd, home=settings.home)
    if reason is not None:
        log.info("terminal.approval_needed", reason=reason, command=command[:200], session_id=ctx.session_id)
        await require_approval(ctx, ApprovalRequest(tool="terminal", action=command, reason=reason,
                                                    pattern=command))
    try:
        # one mkdir syscall on a local folder: cheaper than the hop to a thread and back
        _make_cwd(settings)
    except OSError as exc:
        raise ToolError(f"The workspace folder {settings.cwd} cannot be used ({exc.strerror}).") from None
    env = child_env({**settings.dotenv, **os.environ}, settings.secret_names, settings.pass_env, cwd=settings.cwd)
    # The command was checked with $HERMES_HOME read as this home: it must run with the same one (a
    # daemon started without the variable would otherwise hand it "" and "$HERMES_HOME/x" become "/x").
    env["HERMES_HOME"] = str(settings.home)
    # likewise $HOME, read as the daemon's home directory (a service may start without the variable)
    env.setdefault("HOME", str(Path.home()))
    log.info("terminal.run", command=command[:200], timeout=timeout, session_id=ctx.session_id)
    try:
        result = await run_command(command, shell=settings.shell, cwd=settings.cwd, env=env, time_limit=timeout,
                                   max_output_bytes=settings.max_output_bytes,
                                   output_ceiling_bytes=settings.output_ceiling_bytes,
                                   kill_grace=settings.kill_grace)
    except OSError as exc:
        raise ToolError(f"The command could not be started ({exc.strerror or exc}).") from None
    log.info("terminal.done", returncode=result.returncode, timed_out=result.timed_out_after is not None,
             output_bytes=result.capture.total, seconds=round(result.seconds, 3), session_id=ctx.session_id)
    return _report(result, settings)


def _timeout(value: object, ceiling: float) -> float:
    if value is None:
        return ceiling
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ToolError("'timeout' must be a positive number of seconds.")
    return min(float(value), ceiling)


def _make_cwd(settings: TerminalSettings) -> None:
    settings.cwd.mkdir(mode=0o700, parents=True, exist_ok=True)


def _report(result: CommandResult, settings: TerminalSettings) -> str:
    """What the model reads: how the command ended, then its output."""
    if result.timed_out_after is not None:
        status = f"killed after {result.timed_out_after:g} s timeout"
    elif result.over_ceiling:
        status = (f"killed: it printed more than {settings.output_ceiling_bytes // 2**20} MiB of output "
                  "(redirect large output to a file and read parts of it)")
    elif result.returncode is not None and result.returncode < 0:
        status = f"killed by signal {_signal_name(-result.returncode)}"
    else:
        status = f"exit code {result.returncode}"
    capture = result.capture
    if capture.total == 0:
        return f"{status}\n(no output)"
    note = ", binary output: unreadable bytes are shown as \ufffd" if capture.looks_binary() else ""
    return f"{status}\noutput ({capture.total:,} bytes{note}):\n{capture.text()}"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
