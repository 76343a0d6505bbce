"""What a function of a connection receives in this backend, and the rows it reads.

Rows behave as SQLite's ``sqlite3.Row`` does (by index, by column name, ``keys()``, ``tuple(row)``),
so a function ported from the SQLite backend reads its rows the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, TypeAlias

import psycopg
from psycopg.rows import RowMaker


class Row(tuple[Any, ...]):
    """A row by position or by column name; one subclass per result shape holds the names."""

    _index: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._index)


def sqlite_like_row(cursor: psycopg.Cursor[Any]) -> RowMaker[Row]:
    """psycopg's row factory: rows as ``Row`` (names from the cursor's description)."""
    description = cursor.description
    if description is None:
        return _no_columns
    shape: type[Row] = type("Row", (Row,), {"__slots__": (), "_index": {col.name: i for i, col in enumerate(description)}})

    def make(values: Sequence[Any]) -> Row:
        return shape(values)

    return make


def _no_columns(values: Sequence[Any]) -> Row:
    return Row(values)


#: what ``PgStore.write``/``read`` pass: a psycopg connection inside an open transaction,
#: with ``Row`` rows
PgConnection: TypeAlias = psycopg.Connection[Any]
