"""A prune never cuts a compression lineage.

Compression ends a session and continues it in a child. Pruning an ended
parent whose child is kept would leave the child without its parent: its
lineage (what session_search and the lineage queries follow) would end there,
and the parent's title would be free for an unrelated session to take, mixing
the ``X``, ``X #2``, ``X #3`` numbering of two conversations. So a prune skips
every session a kept session descends from, and says so.
"""

from __future__ import annotations

import time

import pytest

from storage import AutoPruneSettings, PruneSkip, StateStore, TitleConflictError

DAY = 86400.0


async def _aged(store: StateStore, sid: str, *, days: float, ended: bool, now: float, source: str = "telegram",
                parent: str | None = None, title: str | None = None) -> None:
    await store.create_session(sid, source, parent_session_id=parent, started_at=now - days * DAY)
    await store.append_message(sid, "user", f"numbat {sid}", timestamp=now - days * DAY + 1)
    if title is not None:
        await store.set_session_title(sid, title)
    if ended:
        await store.end_session(sid, "compression")


async def _chain(store: StateStore, now: float) -> None:
    """X (200 days, compressed) -> X #2 (150 days, compressed) -> X #3 (live)."""
    await _aged(store, "root", days=200, ended=True, now=now, title="X")
    await _aged(store, "middle", days=150, ended=True, now=now, parent="root", title="X #2")
    await _aged(store, "live", days=1, ended=False, now=now, parent="middle", title="X #3")


async def test_prune_keeps_the_ancestors_of_a_live_session_and_says_so(store: StateStore) -> None:
    now = time.time()
    await _chain(store, now)
    await _aged(store, "lonely", days=200, ended=True, now=now)
    result = await store.prune(older_than_days=100)
    assert result.deleted == 1
    assert result.skipped == (PruneSkip("root", "X", "live"), PruneSkip("middle", "X #2", "live"))
    assert await store.get_session("lonely") is None
    ancestors = await store.lineage_ancestors("live")
    assert [a["id"] for a in ancestors] == ["live", "middle", "root"]
    # The lineage's title stays the lineage's: /resume X finds its newest part, and the
    # next compression numbers after it; nobody else can take "X".
    assert await store.resolve_session_by_title("X") == "live"
    assert await store.get_next_title_in_lineage("X") == "X #4"
    await store.create_session("newcomer", "telegram")
    with pytest.raises(TitleConflictError):
        await store.set_session_title("newcomer", "X")


async def test_a_lineage_goes_as_a_whole_once_its_newest_part_may_go(store: StateStore) -> None:
    now = time.time()
    await _chain(store, now)
    await store.end_session("live", "session_reset")
    # "live" ended, but it is too young: the chain stays.
    assert (await store.prune(older_than_days=100)).deleted == 0
    result = await store.prune(older_than_days=0.5)
    assert (result.deleted, result.skipped) == (3, ())
    assert await store.recent_sessions(limit=10) == []


async def test_a_kept_session_of_another_source_keeps_its_parent(store: StateStore) -> None:
    now = time.time()
    await _aged(store, "tg_parent", days=200, ended=True, now=now)
    await _aged(store, "cli_child", days=200, ended=True, now=now, parent="tg_parent", source="cli")
    result = await store.prune(older_than_days=100, source="telegram")
    assert (result.deleted, [s.session_id for s in result.skipped]) == (0, ["tg_parent"])
    assert (await store.get_session("cli_child") or {}).get("parent_session_id") == "tg_parent"


async def test_a_branching_lineage_keeps_what_any_kept_branch_needs(store: StateStore) -> None:
    now = time.time()
    await _aged(store, "trunk", days=300, ended=True, now=now)
    await _aged(store, "dead_branch", days=250, ended=True, now=now, parent="trunk")
    await _aged(store, "live_branch", days=2, ended=False, now=now, parent="trunk")
    result = await store.prune(older_than_days=100)
    assert result.deleted == 1 and await store.get_session("dead_branch") is None
    assert [s.session_id for s in result.skipped] == ["trunk"]


async def test_a_cycle_of_parents_does_not_hang_the_prune(store: StateStore) -> None:
    now = time.time()
    await _aged(store, "a", days=200, ended=True, now=now)
    await _aged(store, "b", days=200, ended=True, now=now, parent="a")
    await store.write(lambda conn: conn.execute("UPDATE sessions SET parent_session_id = 'b' WHERE id = 'a'"))
    await _aged(store, "c", days=1, ended=False, now=now, parent="b")
    result = await store.prune(older_than_days=100)
    assert result.deleted == 0 and {s.session_id for s in result.skipped} == {"a", "b"}


async def test_auto_prune_keeps_the_lineage_too(store: StateStore) -> None:
    now = time.time()
    await _chain(store, now)
    settings = AutoPruneSettings(auto_prune=True, retention_days=30, vacuum_after_prune=False)
    assert await store.maybe_auto_prune(settings, now=now) == 0
    assert [a["id"] for a in await store.lineage_ancestors("live")] == ["live", "middle", "root"]
