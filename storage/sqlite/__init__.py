"""The SQLite backend: state.db, the reference schema v11 plus the gateway's
tables, behind one writer task and read-only readers.

By job:

- ``_connection``, ``_lock``: opening the file (WAL, pragmas); the sidecar
  lock that makes one process its only writer.
- ``_fts_index`` (``fts_index``): the indexer that fills the FTS tables after
  the commit, and where FTS rows are deleted (read its docstring before
  deleting messages); ``_fts_layout`` (``fts_layout``): the FTS layout and its
  online conversion; ``_search_tail``: search over the rows not indexed yet.
- ``_schema``, ``_migrate``, ``_rekey``: the DDL and the upgrade of any older
  database (``_rekey``: old thread session keys into the documented format).
- ``_writer`` (the event loop's side), ``_committer`` (the writer thread's:
  transactions, replays, checkpoints), ``_writer_stats``; ``_reader``.
- ``_store``: ``StateStore``, the async door the rest of the code uses.
- ``_ops`` (writes), ``_queries`` (reads), ``_search``, ``_search_plan``,
  ``_fts``: sessions and messages; ``_prune``: what a prune deletes and
  which ended sessions it keeps for a lineage; ``_usage``: token usage over time.
- ``_bindings``, ``_ownership``, ``_inbound``, ``_outbound``, ``_handoffs``, ``_cron``,
  ``_home_channels``, ``_attachments``, ``_approvals``, ``_settings``, ``_pairing``, ``_background``: the gateway's tables;
  ``_history``: a session's history edited (/retry's superseded answers, /undo);
  ``_userdata`` (one sender's sessions and messages, for an export) and ``_forget`` (deleting
  every row of one sender in one transaction): a person's data across them.

Every function of a connection runs inside whatever transaction the caller
opened (``StateStore.write`` gives it the writer's), so callers compose them
into one atomic write. The modules are private; ``storage`` re-exports what
other packages use.
"""

from . import _approvals as approvals
from . import _attachments as attachments
from . import _background as background
from . import _bindings as bindings
from . import _cron as cron
from . import _forget as forget
from . import _fts_index as fts_index
from . import _fts_layout as fts_layout
from . import _fts_merge as fts_merge
from . import _handoffs as handoffs
from . import _history as history
from . import _home_channels as home_channels
from . import _inbound as inbound
from . import _ops as ops
from . import _outbound as outbound
from . import _ownership as ownership
from . import _pairing as pairing
from . import _queries as queries
from . import _search as search
from . import _settings as settings
from . import _usage as usage
from . import _userdata as userdata
from ._connection import open_readonly_connection, quick_check
from ._fts import sanitize_fts5_query
from ._lock import WriterLock, lock_path_for, read_holder_pid
from ._migrate import MigrationReport, check_sqlite_features
from ._reader import Reader
from ._schema import GATEWAY_VERSION_KEY, REFERENCE_VERSION, latest_gateway_version, latest_version
from ._store import StateStore
from ._writer import Writer
from ._writer_stats import CheckpointResult, WriterSettings, WriterStats

__all__ = [
    "GATEWAY_VERSION_KEY",
    "REFERENCE_VERSION",
    "CheckpointResult",
    "MigrationReport",
    "Reader",
    "StateStore",
    "Writer",
    "WriterLock",
    "WriterSettings",
    "WriterStats",
    "approvals",
    "attachments",
    "background",
    "bindings",
    "check_sqlite_features",
    "cron",
    "forget",
    "fts_index",
    "fts_layout",
    "fts_merge",
    "handoffs",
    "history",
    "home_channels",
    "inbound",
    "latest_gateway_version",
    "latest_version",
    "lock_path_for",
    "open_readonly_connection",
    "ops",
    "outbound",
    "ownership",
    "pairing",
    "queries",
    "quick_check",
    "read_holder_pid",
    "sanitize_fts5_query",
    "search",
    "settings",
    "usage",
    "userdata",
]
