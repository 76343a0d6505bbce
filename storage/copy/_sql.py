"""The SQL both backends share for a copy: counting rows, and reading one batch in key order.

Rows are read by keyset (``WHERE key > last ORDER BY key LIMIT n``), never by OFFSET: a batch costs
the same at the end of a large table as at its start, and the last key read is all a resume needs.
The order is the source's own (its collation), used only on the source, so it is consistent.
A table that references itself is read parents first: by depth in its tree, then by key.
Identifiers are the reflected table and column names, quoted; values are always parameters
(``mark`` is the driver's placeholder: ``?`` for sqlite3, ``%s`` for psycopg).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import StorageError
from ._plan import TablePlan


def ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def count_sql(table: TablePlan) -> str:
    where = f" WHERE {table.where}" if table.where else ""
    return f"SELECT count(*) FROM {ident(table.name)}{where}"


def batch_sql(table: TablePlan, mark: str, after: Sequence[Any] | None, limit: int) -> tuple[str, list[Any]]:
    """The next batch's SELECT: ``table.columns`` (then the depth, for a tree) in copy order."""
    cols = ", ".join(f"t.{ident(c)}" for c in table.columns)
    conds = [table.where] if table.where else []
    params: list[Any] = []
    if table.parent is not None:
        (k,) = table.key
        name, p, kq = ident(table.name), ident(table.parent), ident(k)
        if after is not None:
            conds.append(f"(tree.depth, t.{kq}) > ({mark}, {mark})")
            params.extend(after)
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        sql = (
            f"WITH RECURSIVE tree(k, depth) AS ("
            f" SELECT r.{kq}, 0 FROM {name} r WHERE r.{p} IS NULL"
            f" OR NOT EXISTS (SELECT 1 FROM {name} up WHERE up.{kq} = r.{p})"
            f" UNION ALL SELECT c.{kq}, tree.depth + 1 FROM {name} c JOIN tree ON c.{p} = tree.k)"
            f" SELECT {cols}, tree.depth FROM {name} t JOIN tree ON t.{kq} = tree.k{where}"
            f" ORDER BY tree.depth, t.{kq} LIMIT {mark}"
        )
        return sql, [*params, limit]
    if not table.key:  # no key to resume at: the whole (small, bookkeeping-sized) table in one batch
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        return f"SELECT {cols} FROM {ident(table.name)} t{where}", params
    keys = ", ".join(f"t.{ident(c)}" for c in table.key)
    if after is not None:
        marks = ", ".join(mark for _ in table.key)
        conds.append(f"({keys}) > ({marks})")
        params.extend(after)
    where = f" WHERE {' AND '.join(conds)}" if conds else ""
    return f"SELECT {cols} FROM {ident(table.name)} t{where} ORDER BY {keys} LIMIT {mark}", [*params, limit]


def key_of(table: TablePlan, row: Sequence[Any]) -> list[Any]:
    """Where the next batch starts after ``row`` (as read by ``batch_sql``)."""
    if table.parent is not None:
        return [row[len(table.columns)], row[table.columns.index(table.key[0])]]
    return [row[table.columns.index(c)] for c in table.key]


def dump_key(key: Sequence[Any] | None) -> str | None:
    if key is None:
        return None
    for value in key:
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            raise StorageError(f"cannot resume at a key of type {type(value).__name__}")
    return json.dumps(list(key))


def load_key(text: str | None) -> list[Any] | None:
    return None if text is None else list(json.loads(text))


def row_bytes(row: Sequence[Any]) -> int:
    """About what a row weighs in memory (text and blobs dominate)."""
    return sum(len(v) if isinstance(v, (str, bytes, bytearray, memoryview)) else 8 for v in row)
