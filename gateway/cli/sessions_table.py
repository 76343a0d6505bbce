"""How ``hermes-gateway sessions`` shows sessions in a terminal: relative times,
cells of a fixed width (wide characters count double), the list table, sizes."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from rich.cells import cell_len, set_cell_size

__all__ = ["fit_cells", "format_size", "format_table", "relative_time"]


def relative_time(ts: float | None, now: float | None = None) -> str:
    if not ts:
        return "—"
    now = time.time() if now is None else now
    delta = now - ts
    if delta < 60:
        return "just now"
    if delta < 3600:
        return f"{int(delta // 60)}m ago"
    if delta < 86400:
        return f"{int(delta // 3600)}h ago"
    if delta < 2 * 86400:
        return "yesterday"
    if delta < 7 * 86400:
        return f"{int(delta // 86400)}d ago"
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d")


def fit_cells(text: str, width: int) -> str:
    """Exactly ``width`` terminal cells: wide characters count double, long text ends in '…'."""
    text = " ".join(text.split())  # a newline in a preview would break the row
    if cell_len(text) > width:
        text = set_cell_size(text, width - 1) + "…"
    return set_cell_size(text, width)


def format_table(rows: list[dict[str, Any]], now: float | None = None) -> list[str]:
    """The reference's two layouts: with a Title column when any session has a title."""
    id_width = max([len("ID"), *(len(r["id"]) for r in rows)])
    with_titles = any(r.get("title") for r in rows)
    if with_titles:
        widths = (22, 40, 12)
        head = ["Title", "Preview", "Last Active"]
    else:
        widths = (50, 12, 10)
        head = ["Preview", "Last Active", "Src"]
    lines = [" ".join(fit_cells(h, w) for h, w in zip(head, widths, strict=True)) + " ID"]
    lines.append("─" * (sum(widths) + len(widths) + id_width))
    for r in rows:
        preview = r.get("preview") or "—"
        when = relative_time(r.get("last_active"), now)
        cols = [r.get("title") or "—", preview, when] if with_titles else [preview, when, r.get("source") or "—"]
        lines.append(" ".join(fit_cells(c, w) for c, w in zip(cols, widths, strict=True)) + " " + r["id"])
    return lines


def format_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
