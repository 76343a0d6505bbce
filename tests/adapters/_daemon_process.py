"""One daemon as a real process (``hermes-gateway run``) on a home the caller wrote: the harness of
the kill -9 and several-node tests, whatever the platform."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: the variables a test's own environment may hold that would reach the daemon's config
_OWN = ("HERMES_", "API_SERVER", "TELEGRAM_", "DISCORD_", "SLACK_")


@asynccontextmanager
async def daemon_process(home: Path) -> AsyncIterator[subprocess.Popen[bytes]]:
    """``hermes-gateway run`` on ``home`` (config.yaml and .env written), this checkout's code, its
    output appended to ``home/daemon.log``; terminated at the end if it still runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN)}
    env.update(HERMES_HOME=str(home), PYTHONPATH=str(ROOT))  # this checkout's code, not the venv's
    log = open(home / "daemon.log", "ab")  # closed below, after the process; each restart appends
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run"], cwd=ROOT, env=env,  # noqa: ASYNC220
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        try:
            await _stop(proc)
        finally:
            log.close()


async def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, and SIGKILL if it is still there after 30 s: a daemon must not outlive its test."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        await asyncio.to_thread(proc.wait, 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        await asyncio.to_thread(proc.wait, 10)
        raise AssertionError("the daemon did not stop within 30 s of SIGTERM (killed)") from None
