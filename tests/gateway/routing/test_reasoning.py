"""The /reasoning switch in state.db: per session, off by default, followed by a compressed child."""

from __future__ import annotations

from gateway.routing.reasoning import quoted_reasoning, reasoning_shown, set_reasoning_shown
from storage import StateStore, ops


async def test_the_switch_is_per_session_and_a_compressed_child_follows_its_parent(store: StateStore) -> None:
    await store.write(lambda c: ops.create_session(c, "parent", "telegram"))
    await store.write(lambda c: ops.create_session(c, "child", "telegram", parent_session_id="parent"))
    await store.write(lambda c: ops.create_session(c, "fresh", "telegram"))
    assert not await reasoning_shown(store, "parent")
    await set_reasoning_shown(store, "parent", True)
    assert await reasoning_shown(store, "parent") and await reasoning_shown(store, "child")
    assert not await reasoning_shown(store, "fresh")  # /new starts without it
    await set_reasoning_shown(store, "child", False)
    assert not await reasoning_shown(store, "child") and await reasoning_shown(store, "parent")


def test_elsewhere_reasoning_is_a_quote_under_a_heading_cut_to_one_message() -> None:
    assert quoted_reasoning("first\n\nsecond") == "💭 Reasoning\n> first\n>\n> second"
    long = quoted_reasoning("x" * 10_000)
    assert len(long) < 3100 and long.endswith("… (7000 more characters)")
