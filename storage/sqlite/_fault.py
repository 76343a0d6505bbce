"""What a failed SQLite write means: busy, full, a disk fault, or the op's own error.

``translate`` turns SQLite's exceptions into the storage error tree (``storage.errors``),
with a message a person can act on; our own errors pass through.
"""

from __future__ import annotations

import sqlite3

from ..errors import GatewayError, StorageBusyError, StorageError, StorageFullError

__all__ = ["is_busy", "is_disk_fault", "is_full", "translate"]


def is_busy(exc: BaseException) -> bool:
    """Another connection holds the lock (SQLITE_BUSY or SQLITE_LOCKED): worth a retry."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.Error) and isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return True
    msg = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg)


def is_full(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and "full" in str(exc).lower()


# SQLite's primary result codes for a write refused by the disk or the file, not by the op itself:
# READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB.
_DISK_FAULTS = frozenset({8, 10, 11, 13, 14, 26})


def is_disk_fault(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return is_full(exc) or (isinstance(exc, sqlite3.Error) and isinstance(code, int) and code & 0xFF in _DISK_FAULTS)


def translate(exc: BaseException) -> BaseException:
    """Our errors pass through; SQLite's become errors a person can act on."""
    if isinstance(exc, GatewayError):
        return exc
    if is_full(exc):
        err: StorageError = StorageFullError(
            "state.db could not grow: the disk (or the configured page budget) is full. "
            "Nothing from this operation was written; free space and retry."
        )
    elif is_busy(exc):
        err = StorageBusyError(
            "state.db stayed locked by another process for longer than the retry budget "
            "(storage.busy_retry_budget); nothing was written. Find the process holding it "
            f"(a CLI, a backup) and retry. SQLite said: {exc}"
        )
    elif isinstance(exc, sqlite3.Error):
        err = StorageError(f"state.db rejected the operation: {exc}")
    else:
        return exc
    err.__cause__ = exc
    return err
