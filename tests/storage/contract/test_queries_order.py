"""Text sorts as state.db sorts it (by code point) even on a PostgreSQL database whose own
collation is linguistic: the same rows on SQLite and on an ICU ``en-US`` database come back in the
same order from every read of ``queries``, ``usage`` and ``settings`` that sorts text.

(The ``db`` fixture's server is initialised with ``C.UTF-8``, where code point order is the default
and a missing ``COLLATE "C"`` would go unnoticed: hence a database of its own here.)
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import storage.postgres
import storage.sqlite
from storage import StateStore, WriterSettings

from ._query_rows import T0, exec_sql, insert_session
from .conftest import Db

_names = itertools.count(1)
#: ids, sources, models and names whose code point order ("B" < "a" < "b" < "Á") is not en-US's
#: ("a" < "Á" < "b" < "B")
_WORDS = ("b", "B", "a", "Á")


@asynccontextmanager
async def _linguistic_pg(pg_server: Any) -> AsyncIterator[Db]:
    name = f"icu_{os.getpid()}_{next(_names)}"
    pg_server.psql(f"CREATE DATABASE {name} TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.UTF-8' "
                   "LOCALE_PROVIDER icu ICU_LOCALE 'en-US'")
    try:
        async with storage.postgres.PgStore(pg_server.url(name)) as pg:
            yield Db("postgresql", pg, storage.postgres)
    finally:
        pg_server.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def _fill(db: Db) -> None:
    await insert_session(db, "root", "cli", started_at=T0 - 10, ended_at=T0)
    for word in _WORDS:
        # sessions that started together (exports: by id), sources and models that tie on counts,
        # costs and tokens (by name), a prune's kept session named by the least id
        await insert_session(db, f"{word}-s", word, started_at=T0, model=f"m{word}", user_id=f"u{word}",
                             input_tokens=10, estimated_cost_usd=None, ended_at=T0 + 1)
        await insert_session(db, f"{word}-child", "cli", started_at=T0 + 1e7, parent_session_id="root")
        await exec_sql(db, "INSERT INTO gateway_session_settings (session_id, name, value, updated_at) "
                           "VALUES (?, ?, ?, ?)", ("s1", word, word, T0))


async def _reads(db: Db) -> dict[str, Any]:
    q, u, s = db.m.queries, db.m.usage, db.m.settings
    stats = await db.read(partial(q.stats))
    tokens = await db.read(partial(q.token_stats, top=3))
    plan = await db.read(partial(q.prune_plan, older_than_days=1, now=T0 + 2e7))
    return {
        "export": [e["id"] for e in await db.read(partial(q.export_all))],
        "by_source": list(stats["by_source"].items()),
        "by_model": [r["model"] for r in tokens["by_model"]],
        "by_user": [(r.platform, r.user_id) for r in await db.read(partial(u.usage_by_user))],
        "by_day": [(r.source, r.model) for r in await db.read(partial(u.usage_by_day, since=0.0))],
        "settings": list(await db.read(partial(s.session_settings, session_id="s1"))),
        "skipped": [(k.session_id, k.continued_by) for k in plan.skipped],
    }


async def test_text_sorts_by_code_point_on_a_linguistic_database(pg_server: Any, tmp_path: Path) -> None:
    async with StateStore(tmp_path / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as st:
        lite = Db("sqlite", st, storage.sqlite)
        await _fill(lite)
        expected = await _reads(lite)
    async with _linguistic_pg(pg_server) as pg:
        # the database's own order is en-US's, not the code points'
        own = await pg.read(lambda conn: conn.execute(
            "SELECT array_agg(w ORDER BY w) FROM unnest(%s::text[]) AS w", (list(_WORDS),)).fetchone()[0])
        assert own == ["a", "Á", "b", "B"]
        await _fill(pg)
        assert await _reads(pg) == expected
    # the order itself: code points, as state.db sorts
    assert expected["export"] == ["root", "B-s", "a-s", "b-s", "Á-s", "B-child", "a-child", "b-child", "Á-child"]
    assert expected["by_source"] == [("cli", 5), ("B", 1), ("a", 1), ("b", 1), ("Á", 1)]
    assert expected["by_model"] == ["mB", "ma", "mb", "mÁ"]
    assert expected["settings"] == ["B", "a", "b", "Á"]
    assert expected["skipped"] == [("root", "B-child")]
