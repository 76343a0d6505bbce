"""``settings`` on both backends: a session's settings and the gateway's global ones."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

from .conftest import Db


@pytest.fixture(autouse=True)
def _pg_server_outside_the_loop(request: pytest.FixtureRequest) -> None:
    # tests/pg/plugin.py migrates its template with asyncio.run: started first from the async
    # ``db`` fixture, that would run inside the test's loop and fail; a sync fixture starts it
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("db") == "postgresql":
        request.getfixturevalue("pg_server")


async def _row(db: Db, sql: str, params: tuple[Any, ...]) -> tuple[Any, ...] | None:
    if db.name == "postgresql":
        sql = sql.replace("?", "%s")
    row = await db.read(lambda conn: conn.execute(sql, params).fetchone())
    return None if row is None else tuple(row)


async def test_session_settings_are_set_replaced_and_removed(db: Db) -> None:
    s = db.m.settings
    assert await db.read(partial(s.get_session, session_id="s1", name="model")) is None
    assert await db.read(partial(s.session_settings, session_id="s1")) == {}
    await db.write(partial(s.set_session, session_id="s1", name="model", value="a", now=1.0))
    await db.write(partial(s.set_session, session_id="s1", name="model", value="b", now=2.0))
    await db.write(partial(s.set_session, session_id="s1", name="reasoning", value="on", now=2.0))
    await db.write(partial(s.set_session, session_id="s2", name="model", value="other", now=2.0))
    assert await db.read(partial(s.get_session, session_id="s1", name="model")) == "b"
    assert await _row(db, "SELECT value, updated_at FROM gateway_session_settings WHERE session_id = ? AND name = ?",
                      ("s1", "model")) == ("b", 2.0)
    assert await db.read(partial(s.session_settings, session_id="s1")) == {"model": "b", "reasoning": "on"}

    await db.write(partial(s.set_session, session_id="s1", name="reasoning", value=None, now=3.0))
    assert await db.read(partial(s.get_session, session_id="s1", name="reasoning")) is None
    await db.write(partial(s.set_session, session_id="s1", name="never-set", value=None, now=3.0))  # no error
    # "" is a value (the gateway stores it for "nothing of its own"), not a removal
    await db.write(partial(s.set_session, session_id="s1", name="previous", value="", now=3.0))
    assert await db.read(partial(s.get_session, session_id="s1", name="previous")) == ""
    assert await db.read(partial(s.get_session, session_id="s2", name="model")) == "other"


async def test_session_settings_list_in_the_order_of_their_names(db: Db) -> None:
    s = db.m.settings
    for name in ("zeta", "Alpha", "beta", "émoji", "alpha"):
        await db.write(partial(s.set_session, session_id="s1", name=name, value=name.upper(), now=1.0))
    assert list(await db.read(partial(s.session_settings, session_id="s1"))) == [
        "Alpha", "alpha", "beta", "zeta", "émoji"]


async def test_clear_session_drops_every_setting_of_one_session(db: Db) -> None:
    s = db.m.settings
    await db.write(partial(s.set_session, session_id="s1", name="model", value="a", now=1.0))
    await db.write(partial(s.set_session, session_id="s1", name="reasoning", value="on", now=1.0))
    await db.write(partial(s.set_session, session_id="s2", name="model", value="kept", now=1.0))
    assert await db.write(partial(s.clear_session, session_id="s1")) == 2
    assert await db.read(partial(s.session_settings, session_id="s1")) == {}
    assert await db.read(partial(s.session_settings, session_id="s2")) == {"model": "kept"}
    assert await db.write(partial(s.clear_session, session_id="s1")) == 0


async def test_global_settings_are_set_replaced_and_removed(db: Db) -> None:
    s = db.m.settings
    assert await db.read(partial(s.get_global, name="model")) is None
    await db.write(partial(s.set_global, name="model", value="m", updated_by="telegram:1", now=1.0))
    assert await db.read(partial(s.get_global, name="model")) == "m"
    await db.write(partial(s.set_global, name="model", value="n", updated_by=None, now=2.0))
    assert await _row(db, "SELECT value, updated_by, updated_at FROM gateway_settings WHERE name = ?",
                      ("model",)) == ("n", None, 2.0)
    await db.write(partial(s.set_global, name="restart_notice", value='{"by": "x"}', updated_by="x", now=2.0))
    await db.write(partial(s.set_global, name="model", value=None, updated_by="telegram:1", now=3.0))
    assert await db.read(partial(s.get_global, name="model")) is None
    assert await db.read(partial(s.get_global, name="restart_notice")) == '{"by": "x"}'
    # a session's setting and a global one of the same name are apart
    await db.write(partial(s.set_session, session_id="s1", name="restart_notice", value="mine", now=1.0))
    assert await db.read(partial(s.get_global, name="restart_notice")) == '{"by": "x"}'


async def test_many_writers_of_one_setting_leave_one_value(db: Db) -> None:
    s = db.m.settings
    values = [f"v{i}" for i in range(12)]
    await asyncio.gather(*(db.write(partial(s.set_global, name="model", value=v, updated_by=v, now=float(i)))
                           for i, v in enumerate(values)))
    await asyncio.gather(*(db.write(partial(s.set_session, session_id="s1", name="model", value=v, now=float(i)))
                           for i, v in enumerate(values)))
    assert await db.read(partial(s.get_global, name="model")) in values
    own = await db.read(partial(s.session_settings, session_id="s1"))
    assert list(own) == ["model"] and own["model"] in values
    rows = await _row(db, "SELECT COUNT(*) FROM gateway_settings WHERE name = ?", ("model",))
    assert rows == (1,)
