"""Small helpers every query module shares: rows as dicts, LIKE escaping."""

from __future__ import annotations

import sqlite3
from typing import Any


def escape_like(text: str) -> str:
    """``text`` matched literally by ``LIKE ? ESCAPE '\\'``."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def row_dict(row: sqlite3.Row) -> dict[str, Any]:
    return {key: row[key] for key in row.keys()}
