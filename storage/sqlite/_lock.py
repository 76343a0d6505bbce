"""The sidecar advisory lock that makes one daemon the only writer of a home.

The lock is an ``flock`` on ``state.db.lock``, never on the database file:
opening and closing the database file outside SQLite would drop SQLite's own
POSIX locks on it.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..errors import StorageLockedError


def lock_path_for(db_path: Path) -> Path:
    return db_path.with_name(db_path.name + ".lock")


def read_holder_pid(lock_path: Path) -> int | None:
    try:
        text = lock_path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


class WriterLock:
    """Exclusive, non-blocking; released on close or when the process dies."""

    def __init__(self, db_path: Path) -> None:
        self.path = lock_path_for(db_path)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageLockedError(str(self.path), read_holder_pid(self.path)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
        finally:
            os.close(self._fd)
            self._fd = None
