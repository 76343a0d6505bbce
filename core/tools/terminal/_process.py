"""Running one command in its own process group, and ending every group that is still alive.

The command runs as ``<shell> -c <command>`` with ``start_new_session=True``: a new session
and process group whose id is the shell's pid, and no controlling terminal (so ``sudo``,
``ssh`` and ``git`` cannot prompt on one and hang). Its stdin is /dev/null, so a command
that reads input gets end-of-file at once. stdout and stderr share one pipe, so the model
sees them interleaved in the order they were written.

The group ends with the command. When the shell exits, whatever it left behind in the
group (``sleep 999 &``) is killed, so nothing outlives the call; on a timeout the group gets
SIGTERM, then SIGKILL after ``kill_grace``; on cancellation (``/stop``) and past the output
ceiling it gets SIGKILL at once. ``kill_all_commands`` does the same for every group still
running when the daemon stops. A process that leaves the group on purpose (``setsid``, a
daemon's double fork) escapes all of this: this is containment of accidents, not a sandbox.

Output is read as it arrives, straight into an ``OutputCapture``: memory is bounded by
the model's limit, not by what the command prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import structlog

from ._capture import OutputCapture

log = structlog.get_logger("hermes.tools.terminal")

#: after the shell exits (and its group is killed), how long to wait for the pipe to close: only a
#: process that escaped the group can hold it open longer, and the call must not wait for it
_DRAIN_SECONDS = 1.0

#: process group id -> the future that resolves when that group's shell exits
_LIVE: dict[int, asyncio.Future[None]] = {}


@dataclass(frozen=True)
class CommandResult:
    #: the shell's exit status; negative: killed by that signal
    returncode: int | None
    #: killed because it ran longer than this many seconds (None: it did not time out)
    timed_out_after: float | None
    #: killed because it printed more than the ceiling
    over_ceiling: bool
    capture: OutputCapture
    seconds: float


class _Protocol(asyncio.SubprocessProtocol):
    def __init__(self, capture: OutputCapture, ceiling: int, loop: asyncio.AbstractEventLoop) -> None:
        self.capture = capture
        self.ceiling = ceiling
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.over_ceiling = False
        self.pgid: int | None = None

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.capture.feed(data if isinstance(data, bytes) else data.encode())
        if self.capture.total > self.ceiling and not self.over_ceiling:
            self.over_ceiling = True
            if self.pgid is not None:
                _signal_group(self.pgid, signal.SIGKILL)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def run_command(command: str, *, shell: str, cwd: Path, env: Mapping[str, str], time_limit: float,
                      max_output_bytes: int, output_ceiling_bytes: int, kill_grace: float) -> CommandResult:
    """Runs ``command`` to its end, its timeout or its cancellation; never leaves its group behind."""
    loop = asyncio.get_running_loop()
    capture = OutputCapture(max_output_bytes)
    started = time.monotonic()
    spawn = asyncio.ensure_future(loop.subprocess_exec(
        lambda: _Protocol(capture, output_ceiling_bytes, loop), shell, "-c", command,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        cwd=cwd, env=dict(env), start_new_session=True))
    try:
        transport, protocol = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # The command may be running already (its pipes were still being set up): asyncio would kill
        # only the shell, leaving what it started. Let the setup finish, then end the whole group.
        with contextlib.suppress(Exception):
            started_transport, _ = await spawn
            _signal_group(started_transport.get_pid(), signal.SIGKILL)
            started_transport.close()
        raise
    pgid = transport.get_pid()
    protocol.pgid = pgid
    _LIVE[pgid] = protocol.exited
    timed_out: float | None = None
    try:
        try:
            async with asyncio.timeout(time_limit):
                # shielded: a timeout must not cancel the future the later waits (and _LIVE) use
                await asyncio.shield(protocol.exited)
        except TimeoutError:
            timed_out = time_limit
            log.info("terminal.timeout", pid=pgid, seconds=time_limit)
            _signal_group(pgid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(kill_grace):
                    await asyncio.shield(protocol.exited)
        # The shell is done (or given up on): what it left in its group goes too.
        _signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_DRAIN_SECONDS):
                await asyncio.shield(protocol.closed)
    except BaseException:  # cancelled (/stop) or anything unexpected: nothing may outlive the call
        _signal_group(pgid, signal.SIGKILL)
        raise
    finally:
        _LIVE.pop(pgid, None)
        transport.close()
    return CommandResult(returncode=transport.get_returncode(), timed_out_after=timed_out,
                         over_ceiling=protocol.over_ceiling, capture=capture,
                         seconds=time.monotonic() - started)


async def kill_all_commands(grace: float = 2.0) -> int:
    """Ends every command still running (the daemon calls this when it stops): SIGTERM to each
    group, up to ``grace`` seconds for the shells to exit, then SIGKILL. Returns how many there were."""
    groups = dict(_LIVE)
    if not groups:
        return 0
    log.info("terminal.kill_all", count=len(groups))
    for pgid in groups:
        _signal_group(pgid, signal.SIGTERM)
    waiting = [f for f in groups.values() if not f.done()]
    if waiting:
        await asyncio.wait([asyncio.shield(f) for f in waiting], timeout=grace)
    for pgid in groups:
        _signal_group(pgid, signal.SIGKILL)
    return len(groups)


def live_command_groups() -> list[int]:
    """The process group ids of the commands running now (for /status and tests)."""
    return list(_LIVE)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
