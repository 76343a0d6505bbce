"""A daemon stand-in: keep a StateStore open until stdin says stop.

Usage: ``python _store_holder.py <db>``; prints ``READY <pid>`` once the store
is open (the sidecar lock is taken), then ``CLOSED`` after stdin gives a line
or reaches EOF and the store has closed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import structlog

from storage import StateStore


async def main(db: Path) -> None:
    async with StateStore(db):
        print(f"READY {os.getpid()}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    print("CLOSED", flush=True)


if __name__ == "__main__":
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    asyncio.run(main(Path(sys.argv[1])))
