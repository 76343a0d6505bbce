"""What a copy reports: its errors, its progress as it goes, and its verification at the end."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..errors import CopyError as CopyError
from ..errors import CopyRefusedError as CopyRefusedError
from ._plan import TablePlan, TableShape


@dataclass(frozen=True)
class Progress:
    """One table's row of ``hermes_copy_progress`` in the target, written in the same transaction
    as the batch it counts: after a ``kill -9`` it says exactly what the target holds."""

    table: str
    #: the source's URL without a password: a resume continues only the same source
    source: str
    #: JSON list: the key of the last row copied (None: none yet)
    last_key: str | None = None
    rows: int = 0
    done: bool = False


@dataclass(frozen=True)
class CopyEvent:
    """``start`` (one per table, before its first batch), ``batch`` (after each committed batch),
    ``note`` (a line worth showing: a resume, a column left behind), ``finish`` (sequences, index)."""

    kind: Literal["start", "batch", "note", "finish"]
    table: str = ""
    copied: int = 0
    total: int = 0
    message: str = ""


@dataclass(frozen=True)
class TableCount:
    table: str
    source: int
    target: int
    #: False for a source table the target has no table for (its rows were not copied)
    copied: bool = True

    @property
    def equal(self) -> bool:
        return self.source == self.target


@dataclass
class CopyResult:
    source: str
    target: str
    counts: list[TableCount] = field(default_factory=list)
    resumed: bool = False
    rows_copied: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def verified(self) -> bool:
        return all(c.equal for c in self.counts)


class Side(Protocol):
    """One backend's end of a copy (``_sqlite_side``, ``_pg_side``)."""

    redacted: str

    async def open_source(self) -> None: ...

    async def open_target(self) -> None: ...

    async def close(self) -> None: ...

    async def identity(self) -> str:
        """What tells one database from another however its URL is spelled (after opening)."""
        ...

    async def gateway_connections(self) -> int:
        """How many gateway nodes are connected to it now (0 where a lock already keeps them out)."""
        ...

    async def unanswered(self) -> int:
        """How many messages taken from their platforms wait for an answer in it (parked, or in
        the hand-off inbox): a gateway answers them when it starts on this database."""
        ...

    async def shapes(self) -> dict[str, TableShape]: ...

    async def count(self, table: TablePlan) -> int: ...

    async def read_batch(self, table: TablePlan, after: list[Any] | None, limit: int,
                         max_bytes: int) -> list[tuple[Any, ...]]: ...

    async def sequence_floor(self, table: TablePlan) -> int: ...

    async def progress(self) -> dict[str, Progress]: ...

    async def write_batch(self, table: TablePlan, rows: list[tuple[Any, ...]], progress: Progress) -> None: ...

    async def clear(self, tables: list[TablePlan]) -> None: ...

    async def finish(self, tables: list[TablePlan], floors: dict[str, int]) -> None: ...
