"""What the scheduler tests share: a daemon on a fake clock, and waiting without sleeping blind."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.scheduler import JobOwner, Jobs, jobs_of

OWNER = JobOwner("testchat", "c1", None, "alice", "agent:main:testchat:dm:c1")


async def until(cond: Callable[[], object], timeout: float = 10.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def settle(seconds: float = 0.3) -> None:
    """Long enough for a run that would start to have started (and been seen)."""
    await asyncio.sleep(seconds)


def jobs(running: Any) -> Jobs:
    found = jobs_of(running.gateway.services)
    assert found is not None
    return found


def cron_texts(running: Any) -> list[str]:
    return [m.text for m in running.chat.sent if m.text.startswith(("⏰", "⚠️ Scheduled"))]


def runs(db: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(db) as conn:
        return [(r[0], r[1], r[2]) for r in conn.execute(
            "SELECT job_id, status, attempt FROM gateway_cron_runs ORDER BY id")]
