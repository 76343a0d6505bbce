"""What a copy moves: the tables both sides have, their shared columns, in an order foreign keys allow.

Each side reflects its own tables (``TableShape``); the plan keeps the tables present on both
sides, the columns present on both sides, and orders the tables so a referenced table is copied
before the tables that point at it (sessions before messages). A table that references itself
(``sessions.parent_session_id``) is copied parents first: see ``TablePlan.parent``.

Not copied, by design:

- each backend's schema bookkeeping: ``schema_version`` (both sides already say 11),
  ``hermes_migrations`` (PostgreSQL's migration record), SQLite's ``sqlite_*`` tables, the FTS5
  tables and their shadow tables (SQLite's search index: rebuilt by the target's own indexer);
  ``hermes_copy_progress`` (this copy's own bookkeeping);
- the ``state_meta`` keys that describe one SQLite file's own machinery (``SKIPPED_META_KEYS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Tables that belong to one backend's machinery, never to the data.
#: PostgreSQL-only tables that are not data: ``gateway_session_order`` (rebuilt by a trigger from the
#: sessions the copy inserts) and the cluster's runtime state (nodes, leases, the hand-off inbox: stop
#: every node before a copy, so the inbox is empty). SQLite's ``gateway_parked`` (messages taken and not
#: yet answered) is its inbox: a copy refuses a source holding any (``Side.unanswered``).
BOOKKEEPING_TABLES = frozenset({
    "schema_version", "hermes_migrations", "hermes_copy_progress", "gateway_session_order",
    "cluster_nodes", "cluster_leases", "cluster_inbox", "gateway_parked",
})

#: ``state_meta`` keys that are SQLite-internal, skipped in both directions:
#: - ``gateway_schema_version``: which gateway schema step the file is at; the target's own schema
#:   (SQLite's steps, PostgreSQL's migrations) says that for itself;
#: - ``fts_layout``, ``fts_indexed_through``, ``fts_convert_through``: the FTS index's layout, its
#:   watermark and its conversion cursor. They describe the source's own FTS tables, which are not
#:   copied; a copied watermark would tell the target's indexer that copied messages are indexed
#:   when they are not (never found by search, and a later delete would remove index entries that
#:   do not exist). The target keeps its own (0 on a new file), so its indexer indexes every copied
#:   message.
#: Every other key (``last_auto_prune``, the learning loop's counters, …) is data and is copied.
SKIPPED_META_KEYS = ("gateway_schema_version", "fts_layout", "fts_indexed_through", "fts_convert_through")

#: the reference's tables go first (a person's conversations), then the gateway's by name
_FIRST = ("sessions", "messages", "state_meta")


@dataclass(frozen=True)
class TableShape:
    """One table as a side reflects it."""

    name: str
    #: the columns a copy may read and write (generated columns left out), in table order
    columns: tuple[str, ...]
    #: the primary key's columns, in key order (empty: the table has none)
    key: tuple[str, ...]
    #: other tables this one references by a foreign key
    references: frozenset[str] = frozenset()
    #: a column referencing this table's own single-column key (a lineage), or None
    parent: str | None = None
    #: the column a sequence (PostgreSQL) or AUTOINCREMENT / rowid (SQLite) fills, or None
    serial: str | None = None


@dataclass(frozen=True)
class TablePlan:
    """One table to copy: the columns both sides have; rows read in ``key`` order (parents first
    when ``parent`` is set), filtered by ``where`` on both sides."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    parent: str | None
    serial: str | None
    #: a condition on the rows both sides count and the source reads (SQL, no parameters)
    where: str | None = None


@dataclass
class CopyPlan:
    tables: list[TablePlan]
    #: what is left behind and why, one line each (a column only the source has, …)
    notes: list[str] = field(default_factory=list)
    #: source tables the target has no table for
    source_only: list[str] = field(default_factory=list)


def meta_filter() -> str:
    keys = ", ".join(f"'{k}'" for k in SKIPPED_META_KEYS)
    return f"key NOT IN ({keys})"


def make_plan(source: dict[str, TableShape], target: dict[str, TableShape]) -> CopyPlan:
    notes: list[str] = []
    names = sorted(n for n in source if n in target and n not in BOOKKEEPING_TABLES)
    source_only = sorted(n for n in source if n not in target and n not in BOOKKEEPING_TABLES)
    tables: dict[str, TablePlan] = {}
    for name in names:
        src, dst = source[name], target[name]
        wanted = set(dst.columns)
        columns = tuple(c for c in src.columns if c in wanted)
        dropped = [c for c in src.columns if c not in wanted]
        if dropped:
            notes.append(f"{name}: column(s) {', '.join(dropped)} not in the target, not copied")
        key = src.key if src.key and all(c in columns for c in src.key) else ()
        # either side's self-reference: the target enforces its own, whatever the source declared
        parent = next((p for p in (dst.parent, src.parent) if p in columns), None) if len(key) == 1 else None
        tables[name] = TablePlan(
            name=name,
            columns=columns,
            key=key,
            parent=parent,
            serial=dst.serial if dst.serial in columns else None,
            where=meta_filter() if name == "state_meta" else None,
        )
    refs = {n: (source[n].references | target[n].references) & set(tables) - {n} for n in tables}
    return CopyPlan(tables=[tables[n] for n in _dependency_order(refs)], notes=notes, source_only=source_only)


def _priority(name: str) -> tuple[int, str]:
    return (_FIRST.index(name), "") if name in _FIRST else (len(_FIRST), name)


def _dependency_order(refs: dict[str, frozenset[str]]) -> list[str]:
    """Referenced tables before their referrers; otherwise ``_FIRST``, then by name. A cycle
    between tables (none in these schemas) falls back to that order for what is left."""
    left = {n: set(r) for n, r in refs.items()}
    order: list[str] = []
    while left:
        ready = sorted((n for n, r in left.items() if not r), key=_priority)
        if not ready:
            ready = sorted(left, key=_priority)[:1]
        first = ready[0]
        order.append(first)
        del left[first]
        for r in left.values():
            r.discard(first)
    return order
