"""state.db: the reference schema v11 and the gateway's tables, behind one writer task.

Public surface, the only one other packages use:

- ``Store``: what the gateway holds, whichever backend: the reference's operations awaited,
  ``write``/``read`` for composed transactions. ``StateStore`` (SQLite) is one: the async door (``write(op)`` runs ``op`` in the writer's
  transaction, ``read(fn)`` on a read-only connection), with ``Writer``,
  ``Reader`` and their settings and counters.
- Functions of a connection, grouped by table family, that callers compose
  into one ``StateStore.write`` transaction or run in ``StateStore.read``:
  ``ops`` (session and message writes), ``queries`` and ``search`` (reads),
  and the gateway's tables: ``bindings`` (routing index, binding history,
  queued titles), ``ownership`` (which sessions a chat may see), ``inbound``
  (dedupe), ``outbound`` (delivery ledger), ``handoffs``, ``cron`` (scheduled jobs and their runs), ``home_channels``,
  ``attachments`` (the files that came with messages), ``approvals`` (what was approved
  "always" in a session), ``settings`` (settings changed at run time: per session, global),
  ``pairing`` (pairing codes,
  the users owners let in, recorded owners), ``userdata`` (one sender's sessions and messages: what an export reads) and ``forget``
  (every row of one sender deleted in one transaction, with its request row),
  ``background`` (/bg tasks), ``history`` (/retry's superseded answers, /undo).
- ``MediaStore``: those files' bytes, content-addressed under
  ``$HERMES_HOME/media/``; ``retention_plan``: which of them media retention removes.
- The rows they return, the schema version, id and title helpers, and the
  exception tree (``storage.errors``).

Layout: what every backend shares sits here (``errors``, ``_model``,
``_text``, ``_retention``); the SQLite backend is ``storage/sqlite/``, and all
SQL lives there; the media files are ``storage/media/`` (no SQL). The PostgreSQL backend is
``storage/postgres/`` (``storage.postgres``, imported by name: it pulls in asyncpg), with its own
SQL; ``StorageURL`` (``storage.url``) says which backend a deployment uses.
"""

from typing import TYPE_CHECKING

from ._door import StoreDoor as Store
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
from ._records import (
    AllowedUser,
    BackgroundTask,
    Exchange,
    PairingCode,
    RecordedOwner,
    Undone,
    UsageRow,
    UsageTotals,
    UserUsage,
)
from ._retention import RetentionPlan, retention_plan
from ._senders import FORGOTTEN_MARKER, ForgetOutcome, ForgetRequestRow, SenderSession
from ._text import clean_title, new_session_id, split_lineage_title
from ._url import StorageURL, parse_storage_url, sqlite_url
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
    StorageUnavailableError,
    StorageURLError,
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
    check_sqlite_features,
    fts_index,
    fts_layout,
    fts_merge,
    latest_gateway_version,
    latest_version,
    lock_path_for,
    open_readonly_connection,
    quick_check,
    read_holder_pid,
    sanitize_fts5_query,
)

# The families of storage functions: SQLite's modules for type checkers, routed by connection at run time.
if TYPE_CHECKING:
    from .sqlite import (
        approvals,
        attachments,
        background,
        bindings,
        cron,
        forget,
        handoffs,
        history,
        home_channels,
        inbound,
        ops,
        outbound,
        ownership,
        pairing,
        queries,
        search,
        settings,
        usage,
        userdata,
    )
else:
    from . import sqlite as _sqlite
    from ._dispatch import Family as _Family

    approvals = _Family(_sqlite.approvals, "approvals")
    attachments = _Family(_sqlite.attachments, "attachments")
    background = _Family(_sqlite.background, "background")
    bindings = _Family(_sqlite.bindings, "bindings")
    cron = _Family(_sqlite.cron, "cron")
    forget = _Family(_sqlite.forget, "forget")
    handoffs = _Family(_sqlite.handoffs, "handoffs")
    history = _Family(_sqlite.history, "history")
    home_channels = _Family(_sqlite.home_channels, "home_channels")
    inbound = _Family(_sqlite.inbound, "inbound")
    ops = _Family(_sqlite.ops, "ops")
    outbound = _Family(_sqlite.outbound, "outbound")
    ownership = _Family(_sqlite.ownership, "ownership")
    pairing = _Family(_sqlite.pairing, "pairing")
    queries = _Family(_sqlite.queries, "queries")
    search = _Family(_sqlite.search, "search")
    settings = _Family(_sqlite.settings, "settings")
    usage = _Family(_sqlite.usage, "usage")
    userdata = _Family(_sqlite.userdata, "userdata")


__all__ = [
    "FORGOTTEN_MARKER",
    "GATEWAY_VERSION_KEY",
    "REFERENCE_VERSION",
    "AllowedUser",
    "AmbiguousSessionError",
    "AttachmentRow",
    "AutoPruneSettings",
    "BackgroundTask",
    "BlobInfo",
    "BlobTooLargeError",
    "ChatOwner",
    "CheckpointResult",
    "CronJobRow",
    "CronRunRow",
    "Exchange",
    "ForgetOutcome",
    "ForgetRequestRow",
    "GatewayError",
    "HandoffRow",
    "HomeChannelRow",
    "IndexEntry",
    "InvalidTitleError",
    "LedgerFile",
    "MediaStore",
    "MigrationReport",
    "PairingCode",
    "PendingReply",
    "PrunePlan",
    "PruneResult",
    "PruneSkip",
    "Reader",
    "RecordedOwner",
    "RetentionPlan",
    "SchemaError",
    "SeenMessage",
    "SenderSession",
    "SessionNotFoundError",
    "SessionTitle",
    "StateStore",
    "StorageBusyError",
    "StorageClosedError",
    "StorageError",
    "StorageFullError",
    "StorageLockedError",
    "StorageURL",
    "StorageURLError",
    "StorageUnavailableError",
    "Store",
    "StoredBlob",
    "TitleConflictError",
    "Undone",
    "UsageRow",
    "UsageTotals",
    "UserUsage",
    "Writer",
    "WriterLock",
    "WriterSettings",
    "WriterStats",
    "approvals",
    "attachments",
    "background",
    "bindings",
    "check_sqlite_features",
    "clean_title",
    "cron",
    "forget",
    "fts_index",
    "fts_layout",
    "fts_merge",
    "handoffs",
    "history",
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
    "pairing",
    "parse_storage_url",
    "queries",
    "quick_check",
    "read_holder_pid",
    "retention_plan",
    "sanitize_fts5_query",
    "search",
    "settings",
    "split_lineage_title",
    "sqlite_url",
    "usage",
    "userdata",
]
