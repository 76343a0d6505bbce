"""Discovery (search_sessions), scroll (messages_around) and the owner filter: the same answers
from state.db and from PostgreSQL."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from storage import ChatOwner

from ._search_corpus import (
    T0,
    bind,
    message,
    messages_around,
    search_messages,
    search_sessions,
    session,
)
from .conftest import Db


@dataclass
class Lineages:
    db: Db
    msgs: dict[str, list[int]]


async def _conversation(db: Db, sid: str, n: int, hits: dict[int, str]) -> list[int]:
    """n messages alternating user/assistant; message i contains hits[i] if given."""
    return [await message(db, sid, "user" if i % 2 == 0 else "assistant", f"{sid} message {i} {hits.get(i, '')}".strip())
            for i in range(n)]


@pytest.fixture
async def lineages(db: Db) -> Lineages:
    await session(db, "root", "cli", started_at=T0, title="Auth")
    await session(db, "cont", "cli", parent="root", started_at=T0 + 100, title="Auth #2")
    await session(db, "other", "telegram", started_at=T0 + 200)
    msgs = {
        "root": await _conversation(db, "root", 14, {7: "oauth"}),
        "cont": await _conversation(db, "cont", 6, {2: "oauth oauth"}),
        "other": await _conversation(db, "other", 12, {0: "oauth"}),
    }
    # Tool output inside the window but outside the bookends (tools are not user+assistant).
    msgs["root"].append(await message(db, "root", "tool", "oauth refresh log zythum", tool_name="terminal"))
    return Lineages(db, msgs)


async def test_one_result_per_lineage(lineages: Lineages) -> None:
    sessions = [r["session_id"] for r in await search_sessions(lineages.db, "oauth", limit=10)]
    assert len(sessions) == 2
    assert "other" in sessions
    assert len({"root", "cont"} & set(sessions)) == 1


async def test_best_hit_first(lineages: Lineages) -> None:
    # bm25: "oauth oauth" in a short message ranks above one "oauth"
    (top, *_) = await search_sessions(lineages.db, "oauth", limit=10)
    assert (top["session_id"], top["match_message_id"]) == ("cont", lineages.msgs["cont"][2])
    hits = await search_messages(lineages.db, "oauth", role_filter=("user", "assistant"))
    assert hits[0]["id"] == lineages.msgs["cont"][2]


async def test_result_shape(lineages: Lineages) -> None:
    root = (await search_sessions(lineages.db, "oauth", limit=10, sort="oldest"))[0]
    assert root["session_id"] == "root"
    assert (root["title"], root["source"], root["when"]) == ("Auth", "cli", T0)
    ids = lineages.msgs["root"]
    anchor = ids[7]
    assert root["match_message_id"] == anchor
    assert ">>>oauth<<<" in root["snippet"]
    assert [m["id"] for m in root["bookend_start"]] == ids[:3]
    assert [m["id"] for m in root["bookend_end"]] == ids[11:14]  # the tool message is not a bookend
    assert root["bookend_start"][0]["content"] == "root message 0"
    assert [m["id"] for m in root["messages"]] == ids[2:13]
    assert [m["id"] for m in root["messages"] if m["anchor"]] == [anchor]
    assert (root["messages_before"], root["messages_after"]) == (5, 5)
    assert set(root) == {"session_id", "title", "when", "source", "snippet", "bookend_start", "messages",
                         "bookend_end", "match_message_id", "messages_before", "messages_after"}
    assert set(root["messages"][0]) == {"id", "role", "content", "tool_name", "timestamp", "anchor"}


async def test_window_at_session_start(lineages: Lineages) -> None:
    other = (await search_sessions(lineages.db, "oauth", limit=10, sort="newest"))[0]
    ids = lineages.msgs["other"]
    assert (other["session_id"], other["match_message_id"]) == ("other", ids[0])
    assert [m["id"] for m in other["messages"]] == ids[:6]
    assert (other["messages_before"], other["messages_after"]) == (0, 5)
    assert [m["id"] for m in other["bookend_end"]] == ids[9:12]


async def test_sort_and_limit(lineages: Lineages) -> None:
    newest = [r["session_id"] for r in await search_sessions(lineages.db, "oauth", limit=10, sort="newest")]
    oldest = [r["session_id"] for r in await search_sessions(lineages.db, "oauth", limit=10, sort="oldest")]
    assert newest == ["other", "cont"]
    assert oldest == ["root", "other"]
    assert len(await search_sessions(lineages.db, "oauth", limit=1)) == 1
    assert len(await search_sessions(lineages.db, "oauth")) == 2


async def test_default_roles_skip_tool_output(lineages: Lineages) -> None:
    assert await search_sessions(lineages.db, "zythum") == []
    (hit,) = await search_sessions(lineages.db, "zythum", role_filter=("user", "assistant", "tool"))
    assert (hit["session_id"], hit["match_message_id"]) == ("root", lineages.msgs["root"][-1])
    assert (hit["messages_before"], hit["messages_after"]) == (5, 0)


async def test_source_filter_and_exclusion(lineages: Lineages) -> None:
    only_tg = await search_sessions(lineages.db, "oauth", source_filter=["telegram"])
    assert [r["session_id"] for r in only_tg] == ["other"]
    without_other = await search_sessions(lineages.db, "oauth", exclude_session_ids=["other"])
    assert [r["session_id"] for r in without_other] in (["root"], ["cont"])


async def test_a_lineage_behind_many_filtered_hits_is_found(db: Db) -> None:
    await session(db, "noisy", "cli")
    for _ in range(250):
        await message(db, "noisy", "tool", "oauth token refreshed oauth", tool_name="terminal")
    await session(db, "quiet", "cli", started_at=T0 + 1)
    quiet = await message(db, "quiet", "user",
                          "we discussed many things today, among them the oauth provider migration and more")
    (hit,) = await search_sessions(db, "oauth")
    assert (hit["session_id"], hit["match_message_id"]) == ("quiet", quiet)
    both = await search_sessions(db, "oauth", role_filter=("user", "assistant", "tool"), limit=3)
    assert {r["session_id"] for r in both} == {"noisy", "quiet"}


async def test_messages_around_scrolls(db: Db) -> None:
    await session(db, "s", "cli")
    await session(db, "x", "cli")
    ids = []
    for i in range(30):
        ids.append(await message(db, "s", "user" if i % 2 == 0 else "assistant", f"m{i}"))
        await message(db, "x", "user", f"interleaved {i}")
    page = await messages_around(db, "s", ids[15], window=10)
    assert (page["session_id"], page["around_message_id"]) == ("s", ids[15])
    assert [m["id"] for m in page["messages"]] == ids[5:26]
    assert [m["content"] for m in page["messages"]][:2] == ["m5", "m6"]
    assert [m["id"] for m in page["messages"] if m["anchor"]] == [ids[15]]
    assert (page["messages_before"], page["messages_after"]) == (10, 10)
    forward = await messages_around(db, "s", page["messages"][-1]["id"], window=10)
    assert [m["id"] for m in forward["messages"]] == ids[15:30]
    assert (forward["messages_before"], forward["messages_after"]) == (10, 4)
    first = await messages_around(db, "s", ids[0], window=3)
    assert [m["id"] for m in first["messages"]] == ids[0:4]
    assert (first["messages_before"], first["messages_after"]) == (0, 3)
    default = await messages_around(db, "s", ids[20])
    assert [m["id"] for m in default["messages"]] == ids[10:30]
    assert len((await messages_around(db, "s", ids[15], window=1000))["messages"]) == 30  # capped at 100 a side


async def test_an_owner_keeps_only_the_sessions_that_chat_may_resume(db: Db) -> None:
    for sid, key, platform, user in (("a", "agent:main:telegram:dm:alice", "telegram", "alice"),
                                     ("b", "agent:main:telegram:dm:bob", "telegram", "bob"),
                                     ("t", "agent:main:cli:dm:t1", "cli", "me")):
        await session(db, sid, platform, user_id=user)
        await message(db, sid, "user", f"zebra crossing in {sid}")
        await bind(db, key, sid, platform, user)
    alice = ChatOwner("agent:main:telegram:dm:alice", "telegram", "alice")
    other_terminal = ChatOwner("agent:main:cli:dm:t2", "cli", "me")
    assert {h["session_id"] for h in await search_messages(db, "zebra", owner=alice)} == {"a"}
    assert [h["session_id"] for h in await search_sessions(db, "zebra", owner=alice)] == ["a"]
    assert [h["session_id"] for h in await search_sessions(db, "zebr", owner=other_terminal)] == ["t"]
    assert len(await search_messages(db, "zebra")) == 3
