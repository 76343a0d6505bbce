"""The PostgreSQL backend (``storage.url: postgresql://…``): the same tables and meanings as
state.db, for several gateway nodes sharing one database.

- ``_store``: ``PgStore``, the async door (``write(op)`` in one transaction, ``read(fn)``), a pool
  of psycopg connections used from worker threads; ``listen_connection`` for ``LISTEN``.
- ``_conn``: ``PgConnection``, what a function of a connection receives, and ``Row`` (read as
  ``sqlite3.Row`` is).
- ``_migrate``: versioned migrations (``migrations/NNNN_name.sql``), applied once under an
  advisory lock however many nodes start together.
- ``cron`` (scheduled jobs and runs: a due run is claimed by one node), ``background`` (/bg tasks),
  ``pairing`` (codes as keyed hashes, attempts, lockout, owners), ``userdata`` (one sender's sessions
  and messages, for an export), ``forget`` (every row of one sender, in one transaction; ``_forget_rows``:
  the other families' rows it deletes).

Functions of a connection are plain functions, named and shaped as the SQLite backend's, so a
caller composes them into one ``write`` the same way. All of this backend's SQL lives here.
"""

from . import _background as background
from . import _cron as cron
from . import _forget as forget
from . import _pairing as pairing
from . import _userdata as userdata
from ._conn import PgConnection, Row
from ._migrate import Migration, applied_versions, latest_pg_version, load_migrations, migrate
from ._store import PgStore

__all__ = [
    "Migration",
    "PgConnection",
    "PgStore",
    "Row",
    "applied_versions",
    "background",
    "cron",
    "forget",
    "latest_pg_version",
    "load_migrations",
    "migrate",
    "pairing",
    "userdata",
]
