"""One numbered step of the gateway's own tables, and what steps share."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Migration", "add_columns"]

@dataclass(frozen=True)
class Migration:
    """A numbered step of the gateway's own tables (their counter is ``gateway_schema_version``)."""

    version: int
    name: str
    statements: tuple[str, ...]
    #: a data step SQL alone cannot say, run after ``statements``
    run: Callable[[sqlite3.Connection], None] | None = None


def add_columns(conn: sqlite3.Connection, table: str, columns: tuple[tuple[str, str], ...]) -> None:
    """``ALTER TABLE ... ADD COLUMN`` for the columns ``table`` does not have yet (a step run again,
    on a file an older release copied back, finds some there)."""
    have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
    for name, decl in columns:
        if name not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {decl}")
