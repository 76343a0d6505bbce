"""Another process writing state.db with plain sqlite3, like a command-line tool.

It does not take the daemon's sidecar lock; it only competes for SQLite's own
write lock. Every step is announced on stdout and waits for the parent on stdin,
so the parent knows for certain when the lock is held.

Usage:

``python _sqlite_peer.py hold <db>``
    BEGIN IMMEDIATE, print ``HOLD``, wait for one line on stdin, COMMIT,
    print ``RELEASED``.

``python _sqlite_peer.py cli <db> <rounds>``
    ``rounds`` times: wait for a line on stdin, BEGIN IMMEDIATE, insert
    session ``cli-<i>``, print ``HOLD <i>``, keep the lock 200-400 ms and until
    the parent sends another line, COMMIT, print ``COMMITTED <i>``. Prints
    ``DONE`` at the end. (Without the first wait the peer would re-take the
    lock the instant it committed, and a sleeping retrier could starve.)
"""

from __future__ import annotations

import random
import sqlite3
import sys
import time


def _connect(db: str) -> sqlite3.Connection:
    # A patient peer: it waits for the daemon's writer as long as it needs to.
    return sqlite3.connect(db, timeout=30.0, isolation_level=None)


def hold(db: str) -> None:
    conn = _connect(db)
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO sessions (id, source, started_at) VALUES ('held-by-peer', 'cli', ?)", (time.time(),)
    )
    print("HOLD", flush=True)
    sys.stdin.readline()
    conn.execute("COMMIT")
    conn.close()
    print("RELEASED", flush=True)


def cli(db: str, rounds: int) -> None:
    conn = _connect(db)
    for i in range(rounds):
        sys.stdin.readline()  # the parent is ready for the next round
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO sessions (id, source, started_at) VALUES (?, 'cli', ?)", (f"cli-{i}", time.time()))
        print(f"HOLD {i}", flush=True)
        time.sleep(random.uniform(0.2, 0.4))
        sys.stdin.readline()  # the parent has seen its writer wait on us
        conn.execute("COMMIT")
        print(f"COMMITTED {i}", flush=True)
    conn.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "hold":
        hold(path)
    elif mode == "cli":
        cli(path, int(sys.argv[3]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
