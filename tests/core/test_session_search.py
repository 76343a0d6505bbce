"""session_search on a seeded state.db: discovery, scroll, browse, and fuzzed arguments."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.tools._base import ToolContext, ToolError
from core.tools.session_search import SESSION_SEARCH_TOOL
from storage import StateStore, bindings

T0 = 1_700_000_000.0
A, A2, B, D, P, C = (
    "20231114_221320_aaaaaa",
    "20231114_223000_a2a2a2",
    "20231115_000000_bbbbbb",
    "20231115_010000_dddddd",
    "20231115_020000_pppppp",
    "20231115_030000_cccccc",
)


@dataclass
class Seed:
    ids: dict[str, list[int]] = field(default_factory=dict)


async def _session(store: StateStore, seed: Seed, sid: str, source: str, started: float, title: str | None,
                   messages: list[tuple[str, str]], parent: str | None = None, ended: str | None = None) -> None:
    await store.create_session(sid, source, started_at=started, parent_session_id=parent,
                               system_prompt="SYSTEM PROMPT MUST NOT LEAK")
    if title:
        await store.set_session_title(sid, title)
    seed.ids[sid] = []
    for i, (role, content) in enumerate(messages):
        kwargs: dict[str, Any] = {"timestamp": started + i}
        if role == "tool":
            kwargs.update(tool_name="read_file", tool_call_id=f"call_{i}")
        seed.ids[sid].append(await store.append_message(sid, role, content, **kwargs))
    if ended:
        await store.end_session(sid, ended)


def _filler(n: int, start: int = 0) -> list[tuple[str, str]]:
    return [("user" if (start + i) % 2 == 0 else "assistant", f"filler line {start + i} about nothing") for i in range(n)]


@pytest.fixture
async def seeded(store: StateStore) -> Seed:
    seed = Seed()
    a_messages = [
        ("user", "Our docker compose stack cannot reach the postgres database"),
        ("tool", "services: db: image: postgres"),  # tool output: not in bookends
        ("assistant", "Let me look at the compose file first."),
        ("user", "Sure, it is in the repo root."),
        *_filler(4, 4),
        ("user", "the bridgeport network was missing from the backend service"),  # index 8
        *_filler(6, 9),
        ("assistant", "Resolved: the macvlan driver is not needed."),
        ("user", "Thanks, that was it."),
    ]
    await _session(store, seed, A, "telegram", T0, "Docker networking", a_messages, ended="compression")
    await _session(store, seed, A2, "telegram", T0 + 1000, "Docker networking #2",
                   [("user", "continuing: macvlan again"), ("assistant", "macvlan macvlan is fine")], parent=A)
    await _session(store, seed, B, "discord", T0 + 5000, "Kubernetes migration",
                   [("user", "moving to kubernetes; the old macvlan setup goes"), ("assistant", "Noted.")],
                   ended="user_exit")
    await _session(store, seed, D, "cli", T0 + 7000, None,
                   [("user", "run the checker please"), ("tool", "kubectl frobnicate: ok"),
                    ("assistant", "The checker passed.")])
    await _session(store, seed, P, "cli", T0 + 8000, "Current work",
                   [("user", "macvlan question in my own lineage"), ("assistant", "answer")], ended="compression")
    await _session(store, seed, C, "cli", T0 + 9000, "Current work #2",
                   [("user", "macvlan question right now")], parent=P)
    return seed


def _ctx(store: StateStore, tmp_path: Path, session_id: str = C) -> ToolContext:
    # The seeded sessions are bound to no chat: these tests read the whole database, as a
    # single-user gateway (session_search.scope: all) does. Privacy is tested below.
    return ToolContext(session_id=session_id, platform="cli", home=tmp_path, store=store, recall_all=True)


async def _call(store: StateStore, tmp_path: Path, **args: Any) -> dict[str, Any]:
    out = await SESSION_SEARCH_TOOL.handler(args, _ctx(store, tmp_path))
    assert "SYSTEM PROMPT MUST NOT LEAK" not in out
    result: dict[str, Any] = json.loads(out)
    return result


# ---------------------------------------------------------------- discovery


async def test_discovery_returns_the_session_with_bookends_and_window(
    store: StateStore, seeded: Seed, tmp_path: Path
) -> None:
    out = await _call(store, tmp_path, query="bridgeport")
    assert out["shape"] == "discovery" and out["count"] == 1
    hit = out["results"][0]
    a_ids = seeded.ids[A]
    match_id = a_ids[8]
    assert hit["session_id"] == A
    assert hit["title"] == "Docker networking"
    assert hit["source"] == "telegram"
    assert hit["when"] == "2023-11-14T22:13:20+00:00"
    assert ">>>bridgeport<<<" in hit["snippet"]
    assert hit["match_message_id"] == match_id
    # ±5 around the match, anchor flagged exactly once and on the match.
    assert [m["id"] for m in hit["messages"]] == a_ids[3:14]
    assert [m["id"] for m in hit["messages"] if m.get("anchor")] == [match_id]
    assert hit["messages_before"] == 5 and hit["messages_after"] == 5
    # Bookends: the first and last three user/assistant messages, tool output skipped.
    assert [m["id"] for m in hit["bookend_start"]] == [a_ids[0], a_ids[2], a_ids[3]]
    assert [m["content"] for m in hit["bookend_end"]] == [
        "filler line 14 about nothing", "Resolved: the macvlan driver is not needed.", "Thanks, that was it."]
    assert all(m["role"] in ("user", "assistant") for m in hit["bookend_start"] + hit["bookend_end"])


async def test_discovery_dedupes_lineages_and_leaves_out_the_current_one(
    store: StateStore, seeded: Seed, tmp_path: Path
) -> None:
    out = await _call(store, tmp_path, query="macvlan", limit=10)
    found = [r["session_id"] for r in out["results"]]
    assert len(found) == 2
    assert B in found
    assert len({A, A2} & set(found)) == 1  # one result for the compressed A -> A2 lineage
    assert P not in found and C not in found  # the current session and its parent

    # From another session's point of view, the C lineage is ordinary history.
    other = json.loads(await SESSION_SEARCH_TOOL.handler({"query": "macvlan", "limit": 10},
                                                         _ctx(store, tmp_path, session_id=D)))
    assert len({P, C} & {r["session_id"] for r in other["results"]}) == 1


async def test_discovery_sort(store: StateStore, seeded: Seed, tmp_path: Path) -> None:
    newest = await _call(store, tmp_path, query="macvlan", sort="newest")
    oldest = await _call(store, tmp_path, query="macvlan", sort="oldest")
    newest_ids = [r["session_id"] for r in newest["results"]]
    oldest_ids = [r["session_id"] for r in oldest["results"]]
    # Sorted by date, each lineage is represented by its newest / oldest session.
    assert newest_ids == [B, A2]
    assert oldest_ids == [A, B]
    assert (await _call(store, tmp_path, query="macvlan", limit=1))["count"] == 1


async def test_discovery_role_filter(store: StateStore, seeded: Seed, tmp_path: Path) -> None:
    assert (await _call(store, tmp_path, query="frobnicate"))["count"] == 0  # tool output is not searched
    for roles in ("user,assistant,tool", "tool", " Tool "):
        out = await _call(store, tmp_path, query="frobnicate", role_filter=roles)
        assert [r["session_id"] for r in out["results"]] == [D]
        assert out["results"][0]["match_message_id"] == seeded.ids[D][1]
    assert (await _call(store, tmp_path, query="checker", role_filter="assistant"))["results"][0][
        "match_message_id"] == seeded.ids[D][2]


async def test_discovery_without_hits_suggests_what_to_try(store: StateStore, seeded: Seed, tmp_path: Path) -> None:
    out = await _call(store, tmp_path, query="nonexistentword")
    assert out["count"] == 0 and out["results"] == [] and "broader" in out["hint"]
    # Pure syntax noise searches nothing rather than failing.
    assert (await _call(store, tmp_path, query='"( AND OR *'))["count"] == 0


async def test_long_messages_are_cut_with_a_note(store: StateStore, tmp_path: Path) -> None:
    await store.create_session("long", "cli", started_at=T0)
    mid = await store.append_message("long", "user", "needle " + "x" * 50_000)
    hit = (await _call(store, tmp_path, query="needle"))["results"][0]
    anchor = next(m for m in hit["messages"] if m["id"] == mid)
    assert len(anchor["content"]) <= 8_000 and "more characters" in anchor["truncated"]
    page = await _call(store, tmp_path, session_id="long", around_message_id=mid, window=0)
    assert len(page["messages"][0]["content"]) == 8_000


# ------------------------------------------------------------------- scroll


async def test_scroll_window_around_a_message(store: StateStore, seeded: Seed, tmp_path: Path) -> None:
    a_ids = seeded.ids[A]
    out = await _call(store, tmp_path, session_id=A, around_message_id=a_ids[8], window=3)
    assert out["shape"] == "scroll" and out["session_id"] == A
    assert [m["id"] for m in out["messages"]] == a_ids[5:12]
    assert [m["id"] for m in out["messages"] if m.get("anchor")] == [a_ids[8]]
    assert out["messages_before"] == 3 and out["messages_after"] == 3
    assert "bookend_start" not in out and "snippet" not in out
    tool_row = (await _call(store, tmp_path, session_id=A, around_message_id=a_ids[1], window=0))["messages"]
    assert tool_row == [{"id": a_ids[1], "role": "tool", "content": "services: db: image: postgres",
                         "tool_name": "read_file", "timestamp": "2023-11-14T22:13:21+00:00", "anchor": True}]


async def test_scroll_reaches_the_edges(store: StateStore, seeded: Seed, tmp_path: Path) -> None:
    a_ids = seeded.ids[A]
    start = await _call(store, tmp_path, session_id=A, around_message_id=a_ids[0], window=10)
    assert start["messages_before"] == 0 and start["messages_after"] == 10
    end = await _call(store, tmp_path, session_id=A, around_message_id=a_ids[-1])
    assert end["messages_after"] == 0 and end["messages_before"] == 10  # default window 10
    # Scrolling on from the last id of a page moves forward.
    page = await _call(store, tmp_path, session_id=A, around_message_id=a_ids[0], window=2)
    nxt = await _call(store, tmp_path, session_id=A, around_message_id=page["messages"][-1]["id"], window=2)
    assert nxt["messages"][0]["id"] == a_ids[0] and nxt["messages"][-1]["id"] == a_ids[4]


async def test_scroll_accepts_a_unique_prefix_and_may_read_the_current_session(
    store: StateStore, seeded: Seed, tmp_path: Path
) -> None:
    out = await _call(store, tmp_path, session_id="20231115_0300", around_message_id=seeded.ids[C][0])
    assert out["session_id"] == C


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ({"session_id": A}, "both"),
        ({"around_message_id": 5}, "both"),
        ({"session_id": "nope", "around_message_id": 1}, "No session"),
        ({"session_id": "2023111", "around_message_id": 1}, "2023111"),  # ambiguous prefix
        ({"session_id": A, "around_message_id": 0}, "between"),
        ({"session_id": A, "around_message_id": 2**70}, "between"),
        ({"session_id": A, "around_message_id": "x"}, "integer"),
        ({"session_id": A, "around_message_id": True}, "integer"),
        ({"session_id": A, "around_message_id": 1, "window": 500}, "between"),
    ],
)
async def test_scroll_refusals(store: StateStore, seeded: Seed, tmp_path: Path, args: dict[str, Any],
                               match: str) -> None:
    with pytest.raises(ToolError, match=match):
        await SESSION_SEARCH_TOOL.handler(args, _ctx(store, tmp_path))


async def test_scroll_anchor_from_another_session_is_refused(store: StateStore, seeded: Seed, tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="not part of session"):
        await SESSION_SEARCH_TOOL.handler({"session_id": A, "around_message_id": seeded.ids[B][0]},
                                          _ctx(store, tmp_path))


# ------------------------------------------------------------------- browse


async def test_browse_lists_recent_sessions(store: StateStore, seeded: Seed, tmp_path: Path) -> None:
    out = await _call(store, tmp_path)
    assert out["shape"] == "browse"
    # Newest first; the current lineage left out; A and A2 shown once, as the newer A2.
    assert [s["session_id"] for s in out["sessions"]] == [D, B, A2]
    b = out["sessions"][1]
    assert b["title"] == "Kubernetes migration" and b["source"] == "discord"
    assert b["preview"] == "moving to kubernetes; the old macvlan setup goes"
    assert b["ended"] is True and b["end_reason"] == "user_exit" and b["message_count"] == 2
    assert b["when"] == "2023-11-14T23:36:40+00:00"
    assert out["sessions"][0]["ended"] is False

    oldest = await _call(store, tmp_path, sort="oldest")
    assert [s["session_id"] for s in oldest["sessions"]] == [A2, B, D]
    assert [s["session_id"] for s in (await _call(store, tmp_path, limit=1))["sessions"]] == [D]
    assert (await _call(store, tmp_path, query="   "))["shape"] == "browse"


async def test_browse_on_an_empty_database(store: StateStore, tmp_path: Path) -> None:
    await store.create_session("only", "cli")
    out = await SESSION_SEARCH_TOOL.handler({}, _ctx(store, tmp_path, session_id="only"))
    assert json.loads(out)["sessions"] == []


# ------------------------------------------------------------------ privacy

ALICE_KEY, BOB_KEY = "agent:main:telegram:dm:alice", "agent:main:telegram:dm:bob"
ALICE_OLD, ALICE_NOW, BOB_NOW = "20240101_000000_a1a1a1", "20240102_000000_a2a2a2", "20240102_000000_b0b0b0"


async def _chat_session(store: StateStore, sid: str, key: str, platform: str, user: str, text: str) -> int:
    """A session that lived in the chat ``key``, bound the way the gateway binds it."""
    await store.create_session(sid, platform, user_id=user, started_at=T0)
    mid = await store.append_message(sid, "user", text)
    await store.write(lambda c: bindings.bind(c, key, sid, platform=platform, chat_id=user, chat_type="dm",
                                              thread_id=None, user_id=user, now=T0))
    return mid


def _chat_ctx(store: StateStore, tmp_path: Path, sid: str, key: str, user: str, platform: str = "telegram",
              recall_all: bool = False) -> ToolContext:
    return ToolContext(session_id=sid, platform=platform, home=tmp_path, store=store, user_id=user,
                       session_key=key, recall_all=recall_all)


async def _as(ctx: ToolContext, **args: Any) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(await SESSION_SEARCH_TOOL.handler(args, ctx))
    return result


@pytest.fixture
async def two_users(store: StateStore) -> int:
    secret = await _chat_session(store, ALICE_OLD, ALICE_KEY, "telegram", "alice", "my vault code is bridgeport-7731")
    await _chat_session(store, ALICE_NOW, ALICE_KEY, "telegram", "alice", "hello again")
    await _chat_session(store, BOB_NOW, BOB_KEY, "telegram", "bob", "what is alice's vault code?")
    return secret


async def test_discovery_reads_only_the_asking_chats_sessions(store: StateStore, two_users: int,
                                                              tmp_path: Path) -> None:
    bob = _chat_ctx(store, tmp_path, BOB_NOW, BOB_KEY, "bob")
    assert (await _as(bob, query="bridgeport"))["count"] == 0
    assert (await _as(bob, query="vault"))["count"] == 0  # not even his own current session
    alice = _chat_ctx(store, tmp_path, ALICE_NOW, ALICE_KEY, "alice")
    (hit,) = (await _as(alice, query="bridgeport"))["results"]
    assert hit["session_id"] == ALICE_OLD and hit["match_message_id"] == two_users


async def test_browse_lists_only_the_asking_chats_sessions(store: StateStore, two_users: int,
                                                           tmp_path: Path) -> None:
    assert (await _as(_chat_ctx(store, tmp_path, BOB_NOW, BOB_KEY, "bob")))["sessions"] == []
    alice = await _as(_chat_ctx(store, tmp_path, ALICE_NOW, ALICE_KEY, "alice"))
    assert [x["session_id"] for x in alice["sessions"]] == [ALICE_OLD]


@pytest.mark.parametrize("session_id", [ALICE_OLD, "20240101"])
async def test_scroll_into_another_chats_session_is_refused(store: StateStore, two_users: int, tmp_path: Path,
                                                            session_id: str) -> None:
    bob = _chat_ctx(store, tmp_path, BOB_NOW, BOB_KEY, "bob")
    with pytest.raises(ToolError, match="No session of this conversation") as refused:
        await SESSION_SEARCH_TOOL.handler({"session_id": session_id, "around_message_id": two_users}, bob)
    with pytest.raises(ToolError) as missing:
        await SESSION_SEARCH_TOOL.handler({"session_id": "nope", "around_message_id": two_users}, bob)
    # Word for word what a session that does not exist gets: nothing tells Bob it is there.
    assert str(refused.value).replace(session_id, "?") == str(missing.value).replace("nope", "?")
    alice = _chat_ctx(store, tmp_path, ALICE_NOW, ALICE_KEY, "alice")
    page = await _as(alice, session_id="20240101", around_message_id=two_users)
    assert page["session_id"] == ALICE_OLD


async def test_recall_all_reads_every_session(store: StateStore, two_users: int, tmp_path: Path) -> None:
    owner = _chat_ctx(store, tmp_path, BOB_NOW, BOB_KEY, "bob", recall_all=True)
    assert [r["session_id"] for r in (await _as(owner, query="bridgeport"))["results"]] == [ALICE_OLD]
    assert ALICE_OLD in {x["session_id"] for x in (await _as(owner))["sessions"]}


async def test_a_terminal_recalls_the_sessions_of_its_login(store: StateStore, tmp_path: Path) -> None:
    """The terminal's /resume rule: any terminal chat of the same login, and the cli sessions it started."""
    await _chat_session(store, "20240101_000000_c1c1c1", "agent:main:cli:dm:c1", "cli", "me", "terminal notes zebra")
    await store.create_session("20240101_000000_c2c2c2", "cli", user_id="me", started_at=T0)
    await store.append_message("20240101_000000_c2c2c2", "user", "zebra from a standalone cli session")
    await _chat_session(store, "20240101_000000_c3c3c3", "agent:main:cli:dm:c3", "cli", "you", "their zebra")
    now = "20240102_000000_c4c4c4"
    await _chat_session(store, now, "agent:main:cli:dm:c4", "cli", "me", "hi")
    mine = _chat_ctx(store, tmp_path, now, "agent:main:cli:dm:c4", "me", platform="cli")
    found = {r["session_id"] for r in (await _as(mine, query="zebra", limit=10))["results"]}
    assert found == {"20240101_000000_c1c1c1", "20240101_000000_c2c2c2"}


# --------------------------------------------------------------------- fuzz

_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80), st.floats(allow_nan=True),
    st.text(max_size=60), st.sampled_from([A, "2023", "newest", "oldest", "user,tool", "macvlan OR \"x", "*"]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_KEYS = st.sampled_from(["query", "limit", "sort", "role_filter", "session_id", "around_message_id", "window",
                         "mode", ""])


_TEXT = st.one_of(st.text(max_size=80), st.sampled_from(["macvlan", "macvlan OR bridge", '"exact phrase"', "mac*",
                                                          "NOT", "a-b.c", "\u6f22\u5b57", "'; DROP TABLE x"]))
_DISCOVERY = st.fixed_dictionaries(
    {"query": _TEXT},
    optional={"limit": st.integers(-3, 25), "sort": st.sampled_from(["newest", "oldest", "best"]),
              "role_filter": st.one_of(_TEXT, st.sampled_from(["user", "tool,assistant", "system, user"]))},
)
_SCROLL = st.fixed_dictionaries(
    {"session_id": st.one_of(_TEXT, st.just(C)),
     "around_message_id": st.one_of(st.integers(1, 3), st.integers(-2, 2**64))},
    optional={"window": st.integers(-2, 60)},
)
_ARGS = st.one_of(st.dictionaries(_KEYS, _VALUES, max_size=5), _DISCOVERY, _SCROLL)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=_ARGS)
async def test_fuzzed_arguments_give_json_or_tool_error(store: StateStore, tmp_path: Path,
                                                        args: dict[str, Any]) -> None:
    if await store.get_session(C) is None:
        await store.create_session(C, "cli")
        await store.append_message(C, "user", "macvlan bridge")
    try:
        out = await SESSION_SEARCH_TOOL.handler(args, _ctx(store, tmp_path))
    except ToolError:
        return
    assert json.loads(out)["shape"] in ("discovery", "scroll", "browse")
