"""The operations of the reference's SessionDB, awaited: one door, whichever backend holds the state.

``StoreDoor`` is what ``StateStore`` (SQLite) and ``PgStore`` (PostgreSQL) have in common: every
method composes the backend's own functions (``_ops``, ``_queries``, ``_search``, which each store
names) into one ``write`` or ``read``. The two stores differ below it (one writer thread and a WAL;
a pool and row locks) and in what only one of them can do (``vacuum``, ``stats``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import structlog

from ._model import AutoPruneSettings, PruneResult, is_scaffolding

if TYPE_CHECKING:
    from .sqlite import WriterStats

T = TypeVar("T")
D = TypeVar("D", bound="StoreDoor")


class WriterView(Protocol):
    """The writer's counters (``WriterStats``), which both stores keep."""

    @property
    def stats(self) -> WriterStats: ...


log = structlog.get_logger("hermes.storage")

AUTO_PRUNE_META_KEY = "last_auto_prune"


class StoreDoor:
    """Every operation of the reference, awaited. Writes resolve after COMMIT.

    What the gateway holds as ``Store``: the operations below, ``write``/``read`` for composed
    transactions, the counters ``status`` and ``/metrics`` show (``writer.stats``), and ``path``
    (the state.db file; None for a database server).
    """

    #: the backend's function families, named by each store
    _ops: ModuleType
    _queries: ModuleType
    _search: ModuleType
    path: Path | None
    writer: WriterView

    def write(self, op: Callable[[Any], T]) -> Awaitable[T]:
        raise NotImplementedError

    def read(self, fn: Callable[[Any], T]) -> Awaitable[T]:
        raise NotImplementedError

    async def open(self) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def vacuum(self) -> None:
        raise NotImplementedError

    async def stats(self) -> dict[str, Any]:
        raise NotImplementedError

    async def catch_up_index(self) -> bool:
        """Wait until every committed message is in the search index (immediate where indexing is not deferred)."""
        return True

    async def healthy(self) -> bool:
        """True when the store can take a write now."""
        return True

    async def __aenter__(self: D) -> D:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ----------------------------------------------------------------- sessions

    async def create_session(self, session_id: str, source: str, **kwargs: Any) -> bool:
        return await self.write(partial(self._ops.create_session, session_id=session_id, source=source, **kwargs))

    async def end_session(self, session_id: str, end_reason: str) -> bool:
        return await self.write(partial(self._ops.end_session, session_id=session_id, end_reason=end_reason))

    async def reopen_session(self, session_id: str) -> None:
        await self.write(partial(self._ops.reopen_session, session_id=session_id))

    async def update_system_prompt(self, session_id: str, system_prompt: str) -> None:
        await self.write(partial(self._ops.update_system_prompt, session_id=session_id, system_prompt=system_prompt))

    async def record_usage(self, session_id: str, **usage: Any) -> None:
        await self.write(partial(self._ops.record_usage, session_id=session_id, **usage))

    async def get_session(self, session_id: str) -> dict[str, Any] | None:
        return await self.read(partial(self._queries.get_session, session_id=session_id))

    async def resolve_session_id(self, id_or_prefix: str) -> str:
        return await self.read(partial(self._queries.resolve_session_id, id_or_prefix=id_or_prefix))

    # ----------------------------------------------------------------- messages

    async def append_message(self, session_id: str, role: str, content: str | None = None, **kwargs: Any) -> int:
        return await self.write(partial(self._ops.append_message, session_id=session_id, role=role,
                                         content=content, **kwargs))

    async def persist_message(
        self,
        session_id: str,
        message: Mapping[str, Any],
        *,
        usage: Mapping[str, Any] | None = None,
        also: Callable[[Any], None] | None = None,
        linked: Callable[[Any, int], None] | None = None,
    ) -> int | None:
        """Persist one OpenAI-format message the moment it is produced.

        Returns the row id, or None for an empty assistant placeholder, which is
        never stored. There is no "flushed up to N" bookkeeping to go stale.
        ``usage`` (token counts of the call that produced it) commits with it,
        and so does ``also`` (bookkeeping that belongs to this message), even
        when the message itself is a placeholder that is not stored. ``linked``
        gets the new row's id, for rows that point at it (attachments); it
        does not run for a placeholder.
        """
        scaffolding = is_scaffolding(message)
        if scaffolding and not usage and also is None:
            return None
        cols = None if scaffolding else self._ops.message_columns(message)

        def op(conn: Any) -> int | None:
            row_id = None if cols is None else self._ops.append_message(conn, session_id=session_id, **cols)
            if usage:
                self._ops.record_usage(conn, session_id, **usage)
            if also is not None:
                also(conn)
            if linked is not None and row_id is not None:
                linked(conn, row_id)
            return row_id

        return await self.write(op)

    async def load_conversation(self, session_id: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The session row and its history in OpenAI format, from one read snapshot."""

        def read(conn: Any) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
            with self._queries.snapshot(conn):
                return (self._queries.get_session(conn, session_id),
                        self._queries.get_messages_as_conversation(conn, session_id))

        return await self.read(read)

    async def get_messages(self, session_id: str) -> list[dict[str, Any]]:
        return await self.read(partial(self._queries.get_messages, session_id=session_id))

    async def get_messages_as_conversation(self, session_id: str) -> list[dict[str, Any]]:
        return await self.read(partial(self._queries.get_messages_as_conversation, session_id=session_id))

    async def clear_messages(self, session_id: str) -> int:
        return await self.write(partial(self._ops.clear_messages, session_id=session_id))

    # ------------------------------------------------------------------- titles

    async def set_session_title(self, session_id: str, title: str | None) -> str | None:
        return await self.write(partial(self._ops.set_session_title, session_id=session_id, title=title))

    async def resolve_session_by_title(self, title: str) -> str | None:
        return await self.read(partial(self._queries.resolve_session_by_title, title=title))

    async def get_next_title_in_lineage(self, title: str) -> str:
        return await self.read(partial(self._ops.next_title_in_lineage, title=title))

    # ------------------------------------------------------------------- search

    async def search_messages(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        return await self.read(partial(self._search.search_messages, query=query, **kwargs))

    async def search_sessions(self, query: str, **kwargs: Any) -> list[dict[str, Any]]:
        return await self.read(partial(self._search.search_sessions, query=query, **kwargs))

    async def messages_around(self, session_id: str, around_message_id: int, window: int = 10) -> dict[str, Any]:
        return await self.read(partial(self._search.messages_around, session_id=session_id,
                                       around_message_id=around_message_id, window=window))

    async def lineage_ancestors(self, session_id: str) -> list[dict[str, Any]]:
        return await self.read(partial(self._queries.lineage_ancestors, session_id=session_id))

    async def lineage_descendants(self, session_id: str) -> list[dict[str, Any]]:
        return await self.read(partial(self._queries.lineage_descendants, session_id=session_id))

    async def recent_sessions(self, **kwargs: Any) -> list[dict[str, Any]]:
        return await self.read(partial(self._queries.recent_sessions, **kwargs))

    async def token_stats(self, top: int = 10) -> dict[str, list[dict[str, Any]]]:
        return await self.read(partial(self._queries.token_stats, top=top))

    # ------------------------------------------------------------ export, prune

    async def export_session(self, session_id: str) -> dict[str, Any] | None:
        return await self.read(partial(self._queries.export_session, session_id=session_id))

    async def export_all(self, source: str | None = None) -> list[dict[str, Any]]:
        return await self.read(partial(self._queries.export_all, source=source))

    async def delete_session(self, session_id: str) -> bool:
        return await self.write(partial(self._ops.delete_session, session_id=session_id))

    async def prune_sessions(self, older_than_days: float = 90, source: str | None = None) -> int:
        return (await self.prune(older_than_days, source)).deleted

    async def prune(self, older_than_days: float = 90, source: str | None = None) -> PruneResult:
        """Like ``prune_sessions``, also saying which sessions were kept for a lineage."""
        return await self.write(partial(self._ops.prune, older_than_days=older_than_days, source=source))

    async def maybe_auto_prune(self, settings: AutoPruneSettings, *, now: float | None = None) -> int | None:
        """The startup sweep: None when off or when it ran too recently.

        The last run is kept in state_meta, so every process of a home shares it.
        """
        if not settings.auto_prune:
            return None
        now = time.time() if now is None else now
        min_gap = settings.min_interval_hours * 3600.0

        def sweep(conn: Any) -> PruneResult | None:
            last = self._ops.get_meta(conn, AUTO_PRUNE_META_KEY)
            if last is not None and now - float(last) < min_gap:
                return None
            result: PruneResult = self._ops.prune(conn, settings.retention_days, now=now)
            self._ops.set_meta(conn, AUTO_PRUNE_META_KEY, repr(now))
            return result

        result = await self.write(sweep)
        if result is None:
            return None
        if result.deleted and settings.vacuum_after_prune:
            await self.vacuum()
        log.info("storage.auto_prune", deleted=result.deleted, retention_days=settings.retention_days,
                 kept_for_lineage=len(result.skipped))
        return result.deleted

    async def get_meta(self, key: str) -> str | None:
        return await self.read(partial(self._ops.get_meta, key=key))

    async def set_meta(self, key: str, value: str) -> None:
        await self.write(partial(self._ops.set_meta, key=key, value=value))
