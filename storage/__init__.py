"""state.db: the reference schema v11 and the gateway's tables, behind one writer task.

Public surface, the only one other packages use:

- ``StateStore``: the async door (``write(op)`` runs ``op`` in the writer's
  transaction, ``read(fn)`` on a read-only connection), with ``Writer``,
  ``Reader`` and their settings and counters.
- Functions of a connection, grouped by table family, that callers compose
  into one ``StateStore.write`` transaction or run in ``StateStore.read``:
  ``ops`` (session and message writes), ``queries`` and ``search`` (reads),
  and the gateway's tables: ``bindings`` (routing index, binding history,
  queued titles), ``ownership`` (which sessions a chat may see), ``inbound``
  (dedupe), ``outbound`` (delivery ledger), ``handoffs``, ``cron`` (scheduled jobs and their runs), ``home_channels``,
  ``attachments`` (the files that came with messages), ``approvals`` (what was approved
  "always" in a session).
- ``MediaStore``: those files' bytes, content-addressed under
  ``$HERMES_HOME/media/``; ``retention_plan``: which of them media retention removes.
- The rows they return, the schema version, id and title helpers, and the
  exception tree (``storage.errors``).

Layout: what every backend shares sits here (``errors``, ``_model``,
``_text``, ``_retention``); the SQLite backend is ``storage/sqlite/``, and all
SQL lives there; the media files are ``storage/media/`` (no SQL). Another backend would be one more sub-package offering the same names,
and this module would import it instead.
"""

from ._model import (
    AttachmentRow,
    AutoPruneSettings,
    ChatOwner,
    CronJobRow,
    CronRunRow,
    HandoffRow,
    HomeChannelRow,
    IndexEntry,
    LedgerFile,
    PendingReply,
    PrunePlan,
    PruneResult,
    PruneSkip,
    SeenMessage,
    SessionTitle,
    is_scaffolding,
)
from ._retention import RetentionPlan, retention_plan
from ._text import clean_title, new_session_id, split_lineage_title
from .errors import (
    AmbiguousSessionError,
    BlobTooLargeError,
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
from .media import BlobInfo, MediaStore, StoredBlob
from .sqlite import (
    GATEWAY_VERSION_KEY,
    REFERENCE_VERSION,
    CheckpointResult,
    MigrationReport,
    Reader,
    StateStore,
    Writer,
    WriterLock,
    WriterSettings,
    WriterStats,
    approvals,
    attachments,
    bindings,
    check_sqlite_features,
    cron,
    handoffs,
    home_channels,
    inbound,
    latest_gateway_version,
    latest_version,
    lock_path_for,
    open_readonly_connection,
    ops,
    outbound,
    ownership,
    queries,
    quick_check,
    read_holder_pid,
    sanitize_fts5_query,
    search,
    usage,
)

__all__ = [
    "GATEWAY_VERSION_KEY",
    "REFERENCE_VERSION",
    "AmbiguousSessionError",
    "AttachmentRow",
    "AutoPruneSettings",
    "BlobInfo",
    "BlobTooLargeError",
    "ChatOwner",
    "CheckpointResult",
    "CronJobRow",
    "CronRunRow",
    "GatewayError",
    "HandoffRow",
    "HomeChannelRow",
    "IndexEntry",
    "InvalidTitleError",
    "LedgerFile",
    "MediaStore",
    "MigrationReport",
    "PendingReply",
    "PrunePlan",
    "PruneResult",
    "PruneSkip",
    "Reader",
    "RetentionPlan",
    "SchemaError",
    "SeenMessage",
    "SessionNotFoundError",
    "SessionTitle",
    "StateStore",
    "StorageBusyError",
    "StorageClosedError",
    "StorageError",
    "StorageFullError",
    "StorageLockedError",
    "StoredBlob",
    "TitleConflictError",
    "Writer",
    "WriterLock",
    "WriterSettings",
    "WriterStats",
    "approvals",
    "attachments",
    "bindings",
    "check_sqlite_features",
    "clean_title",
    "cron",
    "handoffs",
    "home_channels",
    "inbound",
    "is_scaffolding",
    "latest_gateway_version",
    "latest_version",
    "lock_path_for",
    "new_session_id",
    "open_readonly_connection",
    "ops",
    "outbound",
    "ownership",
    "queries",
    "quick_check",
    "read_holder_pid",
    "retention_plan",
    "sanitize_fts5_query",
    "search",
    "split_lineage_title",
    "usage",
]
