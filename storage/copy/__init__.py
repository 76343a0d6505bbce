"""Moving data between backends: ``hermes-gateway storage copy --from URL --to URL``.

- ``copy_storage``: every table of the reference schema and of the gateway, SQLite to PostgreSQL
  or back, keeping every id, in batches that each commit with their progress in the target (a
  ``kill -9`` resumes where it stopped), then a count of every table on both sides.
- ``make_plan`` (the tables and columns a copy moves, in what order: ``CopyPlan``, ``TablePlan``,
  from each side's ``TableShape``s).
- ``CopyEvent`` (what a progress display shows), ``CopyResult`` and ``TableCount`` (the
  verification), ``CopyError``/``CopyRefusedError``.
- ``_plan``: which tables, columns and order; what is deliberately not copied and why
  (``SKIPPED_META_KEYS``); ``_sql``: the batch reads both backends share; ``_sqlite_side`` and
  ``_pg_side``: each backend's end (opening, reading, writing a batch, sequences, the index).
"""

from ._model import CopyError, CopyEvent, CopyRefusedError, CopyResult, Progress, TableCount
from ._plan import BOOKKEEPING_TABLES, SKIPPED_META_KEYS, CopyPlan, TablePlan, TableShape, make_plan
from ._run import BATCH_ROWS, copy_storage

__all__ = [
    "BATCH_ROWS",
    "BOOKKEEPING_TABLES",
    "SKIPPED_META_KEYS",
    "CopyError",
    "CopyEvent",
    "CopyPlan",
    "CopyRefusedError",
    "CopyResult",
    "Progress",
    "TableCount",
    "TablePlan",
    "TableShape",
    "copy_storage",
    "make_plan",
]
