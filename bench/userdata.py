"""/export-my-data's memory: the peak RSS of an export of 1 000 and of 100 000 messages.

Method: one state.db (in a temporary folder) gets a person with ``N`` messages in their DM (half
theirs, half answers, 200-400 characters each, every user message with its sender row), written
through the storage functions the gateway uses, in one transaction. Each export then runs in a
fresh child process (``python -m bench.userdata --child``) that opens a ``Reader`` and calls
``gateway.userdata.write_export`` exactly as the daemon does, and reports its own peak RSS
(``ru_maxrss``), the file's size and the seconds it took. The figure that matters is the
difference between the two peaks: an export that held the messages would grow with them; a
streamed one stays flat. Last, the 100k person is forgotten (``storage.forget.forget_sender``, one
transaction through the writer) and its duration printed: while it runs, other writes wait.
``BENCH_SCALE`` scales ``N``.

Target: the 100k export's peak RSS within 20 MiB of the 1k export's.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from storage import Reader, StateStore, forget, ops, userdata

SMALL, LARGE = 1_000, 100_000
TARGET_MIB = 20.0


def fill(conn: sqlite3.Connection, session_id: str, user_id: str, n: int) -> None:
    """``n`` messages in the person's DM session (in the caller's transaction)."""
    ops.create_session(conn, session_id, "telegram", user_id=user_id)
    conn.execute("INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, first_bound_at) "
                 "VALUES (?, ?, 'telegram', ?, 0)", (f"agent:main:telegram:dm:{user_id}", session_id, user_id))
    for i in range(n):
        text = f"message {i} " + "lorem ipsum dolor sit amet " * (8 + i % 8)
        if i % 2 == 0:
            ops.append_message(conn, session_id, "user", text)
            userdata.record_sender(conn, session_id, "telegram", user_id)
        else:
            ops.append_message(conn, session_id, "assistant", text)


def child(db: str, out: str, user_id: str) -> None:
    from gateway.userdata import write_export

    started = time.perf_counter()
    reader = Reader(Path(db), workers=1)
    try:
        summary = reader.run_sync(lambda c: write_export(c, Path(out), "telegram", user_id, profile=None))
    finally:
        reader.close()
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"messages": summary.messages, "bytes": summary.bytes, "peak_kib": peak_kib,
                      "seconds": time.perf_counter() - started}))


def export_in_child(db: Path, out: Path, user_id: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "bench.userdata", "--child", str(db), str(out), user_id],
                          capture_output=True, text=True, check=True, env=env, timeout=900)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    scale = float(os.environ.get("BENCH_SCALE", "1"))
    small, large = max(2, int(SMALL * scale)), max(4, int(LARGE * scale))
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-userdata-"))
    try:
        db = tmp / "state.db"
        import asyncio

        async def build() -> None:
            async with StateStore(db) as store:
                await store.write(lambda c: fill(c, "s-small", "1", small))
                await store.write(lambda c: fill(c, "s-large", "2", large))

        started = time.perf_counter()
        asyncio.run(build())
        print(f"state.db with {small} + {large} messages written in {time.perf_counter() - started:.1f} s")
        rows = []
        for user in ("1", "2"):
            r = export_in_child(db, tmp / f"export-{user}.json", user)
            rows.append(r)
            print(f"export of {int(r['messages']):>7} messages: {r['bytes'] / 2**20:7.1f} MiB file, "
                  f"peak RSS {r['peak_kib'] / 1024:6.1f} MiB, {r['seconds']:.1f} s")
        growth = (rows[1]["peak_kib"] - rows[0]["peak_kib"]) / 1024
        verdict = "ok" if growth <= TARGET_MIB else "MISS"
        print(f"peak RSS growth from {small} to {large} messages: {growth:.1f} MiB (target <= {TARGET_MIB}) {verdict}")

        async def forget_large() -> float:
            async with StateStore(db) as store:
                began = time.perf_counter()
                await store.write(lambda c: forget.forget_sender(c, "telegram", "2", requested_by="bench",
                                                                 forget_memory=False, now=time.time()))
                return time.perf_counter() - began

        took = asyncio.run(forget_large())
        print(f"forget of {large} messages: one transaction of {took:.1f} s (the writer's other work waits for it)")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(main())
