"""``copy_storage``: every row of one backend into another, in batches, resumable, verified.

1. Open both ends the normal way (the target is created or migrated; see the two sides).
2. Plan: the tables and columns both sides have, in foreign-key order (``_plan``).
3. Decide what the target is: empty (copy), a copy of this same source stopped part way (resume
   from its ``hermes_copy_progress`` rows), or anything else (refused unless ``force``, which
   empties the copied tables first).
4. Each table in batches of ``batch_rows`` (fewer when the rows are large): read after the last
   key, write the rows and the table's progress row in ONE target transaction. A ``kill -9`` loses
   at most the batch in flight, and the progress row never counts a row the target lacks.
5. Finish: sequences past the copied ids; on SQLite, the search index catches up.
6. Verify: row counts of every copied table on both sides.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable

import psycopg

from .._url import StorageURL
from ._model import CopyError, CopyEvent, CopyRefusedError, CopyResult, Progress, Side, TableCount
from ._pg_side import PgSide
from ._plan import CopyPlan, TablePlan, make_plan
from ._sql import dump_key, key_of, load_key, row_bytes
from ._sqlite_side import SqliteSide

BATCH_ROWS = 5000
#: a batch stops early past this many bytes of values (a run of very large messages)
BATCH_BYTES = 32 * 1024 * 1024

Listener = Callable[[CopyEvent], None]


def _side(url: StorageURL) -> Side:
    return SqliteSide(url) if url.backend == "sqlite" else PgSide(url)


async def copy_storage(
    source: StorageURL,
    target: StorageURL,
    *,
    force: bool = False,
    batch_rows: int = BATCH_ROWS,
    batch_bytes: int = BATCH_BYTES,
    on_event: Listener | None = None,
) -> CopyResult:
    """Copy ``source`` into ``target``; the result's ``verified`` says whether every count matched."""
    emit: Listener = on_event or (lambda event: None)
    if batch_rows < 1:
        raise CopyError("the batch size must be at least 1")
    src, dst = _side(source), _side(target)
    if src.redacted == dst.redacted:
        raise CopyRefusedError(f"the source and the target are the same database ({src.redacted})")
    try:
        return await _copy(src, dst, force, batch_rows, batch_bytes, emit)
    except psycopg.Error as exc:  # what the sides did not already put in words
        raise CopyError(f"the copy stopped: {_words(exc)}") from None
    except sqlite3.Error as exc:
        raise CopyError(f"the copy stopped: {_words(exc)}") from None
    finally:
        await dst.close()
        await src.close()


def _words(exc: BaseException) -> str:
    """The driver's message on one line (libpq and SQLite name tables, keys and users, never a password)."""
    return " ".join((str(exc) or type(exc).__name__).split())[:400]


async def _copy(src: Side, dst: Side, force: bool, batch_rows: int, batch_bytes: int, emit: Listener) -> CopyResult:
    await src.open_source()
    await dst.open_target()
    if await src.identity() == await dst.identity():
        raise CopyRefusedError(f"{src.redacted} and {dst.redacted} are the same database")
    for side, role in ((src, "source"), (dst, "target")):
        if nodes := await side.gateway_connections():
            emit(CopyEvent("note", message=(
                f"{nodes} hermes-gateway connection(s) are open on the {role} {side.redacted}: stop every node "
                "until the copy is done, or what they write meanwhile is missed (the counts will say so)")))
    if waiting := await src.unanswered():
        raise CopyRefusedError(
            f"{waiting} message(s) taken from their platforms wait for an answer in {src.redacted}: start the "
            "gateway on it once (it answers them at its start), stop it, then copy")
    plan = make_plan(await src.shapes(), await dst.shapes())
    result = CopyResult(source=src.redacted, target=dst.redacted, notes=list(plan.notes))
    for note in plan.notes:
        emit(CopyEvent("note", message=note))
    progress = await _starting_point(src, dst, plan, force, emit)
    result.resumed = bool(progress)
    for table in plan.tables:
        result.rows_copied += await _copy_table(src, dst, table, progress.get(table.name),
                                                batch_rows, batch_bytes, emit)
    emit(CopyEvent("finish", message="setting sequences and indexing for search"))
    floors = {t.name: await src.sequence_floor(t) for t in plan.tables if t.serial is not None}
    await dst.finish(plan.tables, floors)
    result.counts = await _verify(src, dst, plan)
    return result


async def _starting_point(src: Side, dst: Side, plan: CopyPlan, force: bool,
                          emit: Listener) -> dict[str, Progress]:
    """The progress rows to resume from ({} for a fresh copy); refuses a target holding other data."""
    progress = await dst.progress()
    others = sorted({p.source for p in progress.values() if p.source != src.redacted})
    if progress and not others:
        done = sum(p.rows for p in progress.values())
        emit(CopyEvent("note", message=f"resuming the copy from {src.redacted}: {done} rows already there"))
        return progress
    held = {t.name: await dst.count(t) for t in plan.tables}
    rows = sum(held.values())
    if not others and rows == 0:
        return {}
    if not force:
        what = (f"it holds a copy from another source ({', '.join(others)})" if others else
                f"it already holds {rows} rows ({', '.join(f'{n}: {c}' for n, c in held.items() if c)})")
        raise CopyRefusedError(
            f"the target {dst.redacted} is not empty: {what}. Copy into an empty database, "
            "or add --force to delete those rows first and copy anew")
    emit(CopyEvent("note", message=f"--force: deleting {rows} rows from {dst.redacted} before copying"))
    await dst.clear(plan.tables)
    return {}


async def _copy_table(src: Side, dst: Side, table: TablePlan, start: Progress | None,
                      batch_rows: int, batch_bytes: int, emit: Listener) -> int:
    total = await src.count(table)
    copied = start.rows if start is not None else 0
    emit(CopyEvent("start", table.name, copied, total))
    if start is not None and start.done:
        return 0
    after = load_key(start.last_key) if start is not None else None
    added = 0
    # a table without a key cannot resume part way: it comes whole, whatever it weighs
    budget = batch_bytes if table.key else sys.maxsize
    while True:
        rows = await src.read_batch(table, after, batch_rows, budget)
        # no key: the table came whole; a short batch (not cut by the byte budget) was the last
        last = not table.key or not rows or (len(rows) < batch_rows and _under(rows, batch_bytes))
        if rows and table.key:
            after = key_of(table, rows[-1])
        copied += len(rows)
        added += len(rows)
        # a finished table keeps no key: a key may be a person's id, which /forget-me must not find here
        key = None if last else dump_key(after)
        await dst.write_batch(table, rows, Progress(table.name, src.redacted, key, copied, last))
        emit(CopyEvent("batch", table.name, copied, max(total, copied)))
        if last:
            return added


def _under(rows: list[tuple[object, ...]], budget: int) -> bool:
    return sum(row_bytes(r) for r in rows) < budget


async def _verify(src: Side, dst: Side, plan: CopyPlan) -> list[TableCount]:
    counts = [TableCount(t.name, await src.count(t), await dst.count(t)) for t in plan.tables]
    for name in plan.source_only:
        whole = TablePlan(name, (), (), None, None)
        counts.append(TableCount(name, await src.count(whole), 0, copied=False))
    return counts
