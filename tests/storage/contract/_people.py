"""Helpers of the contract tests of the people families (cron, background, pairing, userdata,
forget): rows of other families written with plain SQL (those families' PostgreSQL ports merge
at the same time), and the PostgreSQL server started before any event loop runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from .conftest import Db


@pytest.fixture(autouse=True)
def _pg_server_before_the_loop(request: pytest.FixtureRequest) -> None:
    """``db`` asks for ``pg_url`` inside the running loop; the session's server is started with
    ``asyncio.run`` (its migrated template), which cannot run there: start it first, here."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")


def sql(db: Db, conn: Any, statement: str, params: Sequence[Any] = ()) -> Any:
    """``statement`` written with ``?`` marks, run on either backend's connection (its cursor)."""
    if db.name == "postgresql":
        statement = statement.replace("?", "%s")
    return conn.execute(statement, tuple(params))


async def rows(db: Db, statement: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of a query, as tuples."""
    return await db.read(lambda c: [tuple(r) for r in sql(db, c, statement, params).fetchall()])


async def one(db: Db, statement: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row of a query."""
    found = await rows(db, statement, params)
    return found[0][0] if found else None
