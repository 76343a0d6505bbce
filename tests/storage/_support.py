"""Small helpers shared by the storage durability and writer tests."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from storage import Writer

WAIT = 20.0  # upper bound for any single wait; never a performance threshold


@contextmanager
def plain_db(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection (what an outside tool would see)."""
    conn = sqlite3.connect(str(path), timeout=WAIT, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


def integrity_check(path: Path) -> str:
    with plain_db(path) as conn:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    return "\n".join(str(r[0]) for r in rows)


def inode(path: Path) -> int:
    return path.stat().st_ino


def read_text(path: Path) -> str:
    return path.read_text()


def wal_size(db: Path) -> int:
    """Size of the -wal file; 0 when it does not exist (deleted on last close)."""
    try:
        return Path(str(db) + "-wal").stat().st_size
    except FileNotFoundError:
        return 0


async def wait_until(predicate: Callable[[], bool], what: str, within: float = WAIT) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() >= deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await asyncio.sleep(0.01)


class Stall:
    """An op that parks the writer thread until released, so that everything
    submitted meanwhile is drained into the *next* batch, deterministically."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.task: asyncio.Task[Any] | None = None

    def _op(self, conn: sqlite3.Connection) -> str:
        self.started.set()
        if not self.release.wait(WAIT):
            raise TimeoutError("stall was never released")
        return "stalled"

    async def engage(self, writer: Writer) -> None:
        self.task = asyncio.create_task(writer.submit(self._op, transactional=False))
        engaged = await asyncio.to_thread(self.started.wait, WAIT)
        assert engaged, "the writer never picked up the stall op"

    async def let_go(self) -> None:
        self.release.set()
        assert self.task is not None
        assert await asyncio.wait_for(self.task, WAIT) == "stalled"


@asynccontextmanager
async def stalled(writer: Writer) -> AsyncIterator[Stall]:
    """Park the writer; the body queues work and calls ``let_go()``. Always released."""
    stall = Stall()
    await stall.engage(writer)
    try:
        yield stall
    finally:
        stall.release.set()


async def queued(writer: Writer, submitted_before: int, n: int) -> None:
    """Wait until ``n`` more ops have been handed to the writer's queue."""
    await wait_until(lambda: writer.stats.submitted >= submitted_before + n, f"{n} ops to be queued")
