"""A daemon stand-in that converts a reference-layout state.db in small batches, slowly.

Usage: ``python _convert_child.py <db>``; opens a StateStore (which starts the
online move to the external FTS layout), prints ``READY`` and then
``PROGRESS <done> <total>`` every time the conversion cursor moves, until the
parent kills it (the test sends SIGKILL mid-conversion).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import structlog

from storage import StateStore, WriterSettings


async def main(db: Path) -> None:
    # Tiny batches and a long idle wait between them: the parent has time to kill mid-way.
    settings = WriterSettings(synchronous="NORMAL", index_batch=20, index_idle_after=0.05)
    async with StateStore(db, writer_settings=settings) as store:
        print("READY", flush=True)
        last = None
        while True:
            conversion = store.writer.stats.fts_conversion
            if conversion != last:
                print(f"PROGRESS {conversion[0]} {conversion[1]}" if conversion else "DONE", flush=True)
                last = conversion
            await asyncio.sleep(0.01)


if __name__ == "__main__":
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    asyncio.run(main(Path(sys.argv[1])))
