"""The daemon as a real process (``hermes-gateway run``) against FakeTelegram and the fake model of
the test's own process: the kill -9 tests' one harness (streams, files, scheduled runs)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port, write_config

from .conftest import daemon_config, telegram_config

ROOT = Path(__file__).resolve().parents[2]
WAIT = 30.0
#: background model calls (titles, reviews) would race the scripted replies
QUIET = {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0}


@asynccontextmanager
async def telegram_daemon(home: Path, fake: FakeTelegram, model: FakeOpenAI, *,
                          telegram: dict[str, Any] | None = None,
                          **sections: dict[str, Any]) -> AsyncIterator[subprocess.Popen[bytes]]:
    """``telegram``: settings for telegram_config; ``sections``: more of config.yaml (``cron=...``)."""
    cfg = daemon_config(model.base_url, free_port(), "telegram", telegram_config(fake, **(telegram or {})),
                        {"agent": QUIET, "storage": {"synchronous": "FULL"}, **sections})
    write_config(home, cfg, {"TELEGRAM_BOT_TOKEN": fake.token, "TELEGRAM_ALLOWED_USERS": str(fake.user["id"])})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER", "TELEGRAM_"))}
    env.update(HERMES_HOME=str(home), PYTHONPATH=str(ROOT))  # this checkout's code, not the venv's
    log = open(home / "daemon.log", "ab")  # closed below, after the process; each restart appends
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run"], cwd=ROOT, env=env,  # noqa: ASYNC220
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            await asyncio.to_thread(proc.wait, 30)
        log.close()


async def until(check: Callable[[], bool], what: str, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Wait for ``check``; fail at once if the daemon exits meanwhile, or after ``WAIT``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not check():
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the daemon exited ({proc.returncode}) while waiting for {what}")
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
