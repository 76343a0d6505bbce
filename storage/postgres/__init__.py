"""The PostgreSQL backend (``storage.url: postgresql://…``): the same tables and meanings as
state.db, for several gateway nodes sharing one database.

- ``_store``: ``PgStore``, the async door (``write(op)`` in one transaction, ``read(fn)``), a pool
  of psycopg connections used from worker threads; ``listen_connection`` for ``LISTEN``.
- ``_conn``: ``PgConnection``, what a function of a connection receives, and ``Row`` (read as
  ``sqlite3.Row`` is).
- ``_search`` (``search``), ``_search_plan``, ``_search_text``: full-text search (migration 0003's
  tsvector and pg_trgm indexes), ranked by FTS5's bm25 so both backends answer alike.
- ``_migrate``: versioned migrations (``migrations/NNNN_name.sql``), applied once under an
  advisory lock however many nodes start together.

Functions of a connection are plain functions, named and shaped as the SQLite backend's, so a
caller composes them into one ``write`` the same way. All of this backend's SQL lives here.
"""

from . import _search as search
from ._conn import PgConnection, Row
from ._migrate import Migration, applied_versions, latest_pg_version, load_migrations, migrate
from ._store import PgStore

__all__ = [
    "Migration",
    "PgConnection",
    "PgStore",
    "Row",
    "applied_versions",
    "latest_pg_version",
    "load_migrations",
    "migrate",
    "search",
]
