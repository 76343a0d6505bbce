"""Child process of the crash test: append under load, report only what was acknowledged.

Usage: ``python _crash_child.py <db> <tag>``

Opens a ``StateStore`` with the default ``WriterSettings`` (synchronous=FULL),
creates a few sessions for this round, prints ``READY <pid>``, then lets many
coroutines append messages forever. Each append is reported on stdout as one
line, *after* its await returned (the commit is the acknowledgement)::

    ACK <row id> <session id> <key> <sha256 of content>

The parent kills this process with SIGKILL at a random moment and checks that
every reported row is in the database with exactly that content.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from pathlib import Path

import structlog

from storage import StateStore

WORKERS = 24
SESSIONS = 6


def _payload(tag: str, worker: int, seq: int) -> tuple[str, dict[str, object]]:
    """A deterministic message of varying size and role (some large, to spill pages)."""
    key = f"{tag}:{worker}:{seq}"
    filler = "abcdefghij" * ((worker * 7919 + seq * 104729) % 400)
    kind = (worker + seq) % 4
    if kind == 0:
        return key, {"role": "user", "content": f"{key} {filler}"}
    if kind == 1:
        call = {"id": f"call-{key}", "type": "function", "function": {"name": "search", "arguments": "{}"}}
        return key, {"role": "assistant", "content": f"{key} {filler}", "tool_calls": [call]}
    if kind == 2:
        return key, {"role": "tool", "tool_call_id": f"call-{key}", "name": "search", "content": f"{key} {filler}"}
    return key, {"role": "assistant", "content": f"{key} {filler}", "finish_reason": "stop"}


async def main(db: Path, tag: str) -> None:
    out = sys.stdout
    async with StateStore(db) as store:
        sessions = [f"crash-{tag}-{i}" for i in range(SESSIONS)]
        for sid in sessions:
            await store.create_session(sid, "cli")
        out.write(f"READY {os.getpid()}\n")
        out.flush()

        async def worker(w: int) -> None:
            seq = 0
            while True:
                sid = sessions[(w + seq) % SESSIONS]
                key, message = _payload(tag, w, seq)
                rowid = await store.persist_message(sid, message)
                # Only now is the append acknowledged; report it.
                digest = hashlib.sha256(str(message["content"]).encode()).hexdigest()
                out.write(f"ACK {rowid} {sid} {key} {digest}\n")
                out.flush()
                seq += 1

        await asyncio.gather(*(worker(w) for w in range(WORKERS)))


if __name__ == "__main__":
    # Keep stdout for acknowledgements only; the store's logs go to stderr.
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=sys.stderr))
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2]))
