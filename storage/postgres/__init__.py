"""The PostgreSQL backend (``storage.url: postgresql://…``): the same tables and meanings as
state.db, for several gateway nodes sharing one database.

- ``_store``: ``PgStore``, the async door (``write(op)`` in one transaction, ``read(fn)``), a pool
  of psycopg connections used from worker threads; ``listen_connection`` for ``LISTEN``.
- ``_conn``: ``PgConnection``, what a function of a connection receives, and ``Row`` (read as
  ``sqlite3.Row`` is).
- ``_ops`` (``ops``): sessions' and messages' writes, titles, deletes, prunes (``_prune``: what a
  prune deletes); ``_attachments`` (``attachments``): the rows of the files that came with messages;
  ``_history`` (``history``): /retry's superseded answers, /undo.
- ``_bindings`` (``bindings``): the routing index; ``lookup`` in a write locks its key.
- ``_handoffs`` (``handoffs``): handoff rows, changed by compare-and-set only.
- ``_home_channels`` (``home_channels``): per platform, where proactive messages land.
- ``_inbound`` (``inbound``): the dedupe record; the primary key dedupes across nodes.
- ``_outbound`` (``outbound``): the delivery ledger; ``pending`` claims with ``SKIP LOCKED``.
- ``_ownership`` (``ownership``): which sessions a chat may see and resume.
- ``cluster`` (``_cluster``, ``_cluster_inbox``): several nodes over one database: nodes and
  their heartbeats, leases with fencing tokens for lanes and roles, the hand-off inbox.
- ``_search`` (``search``), ``_search_plan``, ``_search_text``, ``_discovery``: full-text search (migration 0003's
  tsvector and pg_trgm indexes), ranked by FTS5's bm25 so both backends answer alike.
- ``_probe``: ``probe`` (the server's version, the migrations applied; never migrates) and
  ``read_once`` (one read-only transaction), for ``doctor`` and the command line.
- ``_migrate``: versioned migrations (``migrations/NNNN_name.sql``), applied once under an
  advisory lock however many nodes start together.
- ``queries``: reads of sessions and messages (recent sessions, an id by prefix, lineage,
  export, what a prune deletes), in state.db's order.
- ``usage``: token sums per local day, per session and per person.
- ``settings``: settings changed at run time, a session's and the gateway's global ones.
- ``approvals``: the action patterns a session approved "always".
- ``cron`` (scheduled jobs and runs: a due run is claimed by one node), ``background`` (/bg tasks),
  ``pairing`` (codes as keyed hashes, attempts, lockout, owners), ``userdata`` (one sender's sessions
  and messages, for an export), ``forget`` (every row of one sender, in one transaction; ``_forget_rows``:
  the other families' rows it deletes).
- ``cron_changes`` (``_cron_changes``): the ids of jobs changed on any node (migration 0010's
  trigger NOTIFYs them), for every node's in-memory jobs.

Functions of a connection are plain functions, named and shaped as the SQLite backend's, so a
caller composes them into one ``write`` the same way. All of this backend's SQL lives here.
"""

from . import _approvals as approvals
from . import _attachments as attachments
from . import _background as background
from . import _bindings as bindings
from . import _cluster as cluster
from . import _cron as cron
from . import _cron_changes as cron_changes
from . import _forget as forget
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
from ._conn import PgConnection, Row
from ._migrate import Migration, applied_versions, latest_pg_version, load_migrations, migrate
from ._probe import PgProbe, probe, read_once
from ._store import PgStore

__all__ = [
    "Migration",
    "PgConnection",
    "PgProbe",
    "PgStore",
    "Row",
    "applied_versions",
    "approvals",
    "attachments",
    "background",
    "bindings",
    "cluster",
    "cron",
    "cron_changes",
    "forget",
    "handoffs",
    "history",
    "home_channels",
    "inbound",
    "latest_pg_version",
    "load_migrations",
    "migrate",
    "ops",
    "outbound",
    "ownership",
    "pairing",
    "probe",
    "queries",
    "read_once",
    "search",
    "settings",
    "usage",
    "userdata",
]
