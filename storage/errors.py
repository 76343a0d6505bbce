"""The exception tree of hermes-gateway.

The root lives in ``storage`` because it is the lowest layer: every other
package may import it, while ``storage`` imports nothing of ours. Messages are
written for the person who has to act on them.
"""

from __future__ import annotations


class GatewayError(Exception):
    """Root of every error hermes-gateway raises on purpose."""


class StorageError(GatewayError):
    """Something went wrong with state.db."""


class StorageBusyError(StorageError):
    """Another process held the write lock for longer than the retry budget."""


class StorageFullError(StorageError):
    """The disk (or the database's page budget) is full; nothing was written."""


class BlobTooLargeError(StorageError):
    """More bytes arrived for a stored file than its limit allows; nothing was kept."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"The file is larger than the limit of {_size(limit)}; it was not kept.")


def _size(n: int) -> str:
    return f"{n / 1_048_576:.1f} MB" if n >= 1_048_576 else f"{n} bytes"


class StorageLockedError(StorageError):
    """Another daemon already owns this state.db."""

    def __init__(self, lock_path: str, holder_pid: int | None) -> None:
        self.lock_path = lock_path
        self.holder_pid = holder_pid
        who = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(
            f"state.db is already in use by {who} (lock file {lock_path}). "
            "Only one hermes-gateway daemon may run per HERMES_HOME; stop the other one first."
        )


class StorageURLError(StorageError):
    """``storage.url`` names no backend we have, or is malformed (the message never shows a password)."""


class StorageUnavailableError(StorageError):
    """The database server cannot be reached or went away mid-operation; nothing was written."""


class CopyError(StorageError):
    """A copy between backends (``storage copy``) could not run or stopped (the message says why
    and never shows a password)."""


class CopyRefusedError(CopyError):
    """A copy that would do harm: a source a daemon is writing, a target holding other data."""


class StorageClosedError(StorageError):
    """The writer has stopped and accepts no more work."""


class SchemaError(StorageError):
    """The database cannot be opened or upgraded (unsupported SQLite, newer schema, ...)."""


class SessionNotFoundError(StorageError):
    """No session has that id (or id prefix)."""


class AmbiguousSessionError(StorageError):
    """An id prefix matched more than one session."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        self.prefix = prefix
        self.candidates = candidates
        shown = ", ".join(candidates[:5]) + (" ..." if len(candidates) > 5 else "")
        super().__init__(f"'{prefix}' matches {len(candidates)} sessions: {shown}. Give more characters.")


class TitleConflictError(StorageError):
    """The title is already used by another session."""

    def __init__(self, title: str, other_session_id: str, suggestion: str) -> None:
        self.title = title
        self.other_session_id = other_session_id
        self.suggestion = suggestion
        super().__init__(
            f"The title '{title}' is already used by session {other_session_id}. "
            f"Try '{suggestion}'."
        )


class InvalidTitleError(StorageError):
    """The title is empty after cleaning or too long."""
