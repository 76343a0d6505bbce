"""Small file primitives shared by the memory files and the skill store.

Both are edited by the agent while other turns (and other processes, such as
the CLI) may read or write the same files, so every write is atomic and every
read-modify-write runs under one lock per folder.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

# One in-process lock per lock file: flock() is per open file description, so two
# threads of this process opening the file separately would not exclude each other
# on every platform; the threading lock makes that explicit.
_THREAD_LOCKS: dict[str, threading.Lock] = {}
_THREAD_LOCKS_GUARD = threading.Lock()


def _thread_lock(path: Path) -> threading.Lock:
    key = str(path)
    with _THREAD_LOCKS_GUARD:
        lock = _THREAD_LOCKS.get(key)
        if lock is None:
            lock = _THREAD_LOCKS[key] = threading.Lock()
        return lock


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Exclusive lock over ``folder`` for this thread and every other process."""
    folder.mkdir(parents=True, exist_ok=True)
    lock_file = folder / ".lock"
    with _thread_lock(lock_file):
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` so that readers see either the old file or the new one, never half.

    tmp file in the same folder + fsync + os.replace + fsync of the folder, so the
    rename itself survives a power cut.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def read_text(path: Path) -> str:
    """The file's text, or "" when it does not exist; bytes that are not UTF-8 become U+FFFD."""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return ""
