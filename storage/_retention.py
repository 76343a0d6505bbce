"""What media retention removes: a pure plan over the attachment rows.

Two limits (``media.retention_days``, ``media.max_total_mb``): rows older than
the age limit go; then, while the files the remaining rows name add up to more
than the size limit, the file used least recently goes with every row that
names it. A file's age is its newest row's: the same photo sent again today is
today's. Files no row names are not counted: ``MediaStore.sweep`` removes them.

The daemon runs it as: ``rows = read(attachments.all_rows)``, ``plan =
retention_plan(rows, ...)``, ``write(attachments.delete_rows(plan.row_ids))``,
then ``MediaStore.sweep(referenced, only=<the sha256s that returned>)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ._model import AttachmentRow

_DAY = 86400.0


@dataclass(frozen=True)
class RetentionPlan:
    """Rows to delete (oldest first), the files no kept row names after that, and the bytes
    those files hold; ``kept_bytes`` is what the files of the kept rows hold."""

    row_ids: tuple[int, ...]
    sha256s: tuple[str, ...]
    freed_bytes: int
    kept_bytes: int


def retention_plan(rows: Iterable[AttachmentRow], *, now: float, retention_days: float | None,
                   max_total_bytes: int | None) -> RetentionPlan:
    """Plan a retention pass over every attachment row; None for a limit that is off."""
    rows = list(rows)
    cutoff = None if retention_days is None else now - retention_days * _DAY
    size: dict[str, int] = {}
    kept: dict[str, list[AttachmentRow]] = {}
    dropped: list[AttachmentRow] = []
    for row in rows:
        size[row.sha256] = max(size.get(row.sha256, 0), row.size)
        if cutoff is not None and row.created_at < cutoff:
            dropped.append(row)
        else:
            kept.setdefault(row.sha256, []).append(row)
    total = sum(size[sha] for sha in kept)
    if max_total_bytes is not None and total > max_total_bytes:
        by_last_use = sorted(kept, key=lambda sha: (max(r.created_at for r in kept[sha]), sha))
        for sha in by_last_use:
            if total <= max_total_bytes:
                break
            dropped.extend(kept.pop(sha))
            total -= size[sha]
    gone = sorted({row.sha256 for row in dropped} - set(kept))
    dropped.sort(key=lambda r: (r.created_at, r.id))
    return RetentionPlan(tuple(r.id for r in dropped), tuple(gone), sum(size[sha] for sha in gone), total)
