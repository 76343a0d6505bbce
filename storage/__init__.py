"""state.db: the reference schema v11 behind one writer task.

Public surface: ``StateStore`` (the async door), ``Writer`` and its settings,
``ops`` (the write operations a caller composes into one ``StateStore.write``
transaction), the schema version, id and title helpers, and the exception tree.
"""

from . import _ops as ops
from ._lock import WriterLock, lock_path_for, read_holder_pid
from ._migrate import MigrationReport, check_sqlite_features
from ._schema import REFERENCE_VERSION, latest_version
from ._store import AutoPruneSettings, StateStore, is_scaffolding
from ._text import clean_title, new_session_id, sanitize_fts5_query, split_lineage_title
from ._writer import CheckpointResult, Writer, WriterSettings, WriterStats
from .errors import (
    AmbiguousSessionError,
    GatewayError,
    InvalidTitleError,
    SchemaError,
    SessionNotFoundError,
    StorageBusyError,
    StorageClosedError,
    StorageError,
    StorageFullError,
    StorageLockedError,
    TitleConflictError,
)

__all__ = [
    "REFERENCE_VERSION",
    "AmbiguousSessionError",
    "AutoPruneSettings",
    "CheckpointResult",
    "GatewayError",
    "InvalidTitleError",
    "MigrationReport",
    "SchemaError",
    "SessionNotFoundError",
    "StateStore",
    "StorageBusyError",
    "StorageClosedError",
    "StorageError",
    "StorageFullError",
    "StorageLockedError",
    "TitleConflictError",
    "Writer",
    "WriterLock",
    "WriterSettings",
    "WriterStats",
    "check_sqlite_features",
    "clean_title",
    "is_scaffolding",
    "latest_version",
    "lock_path_for",
    "new_session_id",
    "ops",
    "read_holder_pid",
    "sanitize_fts5_query",
    "split_lineage_title",
]
