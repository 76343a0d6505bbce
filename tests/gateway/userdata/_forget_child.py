"""Child process of the forget crash test: a forget stopped at a chosen point, to be killed there.

Usage: ``python _forget_child.py <home> <platform:user> <point>``

``point``:

- ``in-transaction``: the writer's transaction has run every deletion of ``storage.forget`` and has
  not committed; prints ``DELETED-NOT-COMMITTED`` and waits there;
- ``after-commit``: the deletion committed (with its request row), the files not yet dealt with;
  prints ``COMMITTED <request id>`` and waits.

The parent sends SIGKILL at that point; what a crash there leaves is then the database's alone.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import time
from pathlib import Path

from storage import StateStore, forget


async def main(home: Path, sender: str, point: str) -> None:
    platform, _, user_id = sender.partition(":")
    async with StateStore(home / "state.db") as store:
        if point == "in-transaction":
            def op(conn: sqlite3.Connection) -> None:
                forget.forget_sender(conn, platform, user_id, requested_by="crash-test", forget_memory=True,
                                     now=time.time())
                print("DELETED-NOT-COMMITTED", flush=True)
                threading.Event().wait()  # the writer thread holds the transaction open until the kill

            await store.write(op)
        else:
            outcome = await store.write(lambda c: forget.forget_sender(
                c, platform, user_id, requested_by="crash-test", forget_memory=True, now=time.time()))
            print(f"COMMITTED {outcome.request_id}", flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3]))
