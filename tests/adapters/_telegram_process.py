"""The daemon as a real process (``hermes-gateway run``) against FakeTelegram and the fake model of
the test's own process: the kill -9 tests' one harness (streams, files, scheduled runs)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port, write_config

from ._daemon_process import daemon_process
from .conftest import daemon_config, telegram_config

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
    async with daemon_process(home) as proc:
        yield proc


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
