"""search_messages, search_sessions (discovery) and messages_around (scroll)
against a real state.db (session-storage.md "Search", sessions.md "session_search")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from storage import ChatOwner, StateStore, bindings

T0 = 1_700_000_000.0


@dataclass
class Corpus:
    store: StateStore
    ids: dict[str, int] = field(default_factory=dict)

    async def add(self, key: str, session_id: str, role: str, content: str | None, **kw: Any) -> int:
        mid = await self.store.append_message(session_id, role, content, **kw)
        self.ids[key] = mid
        return mid


async def _ids(store: StateStore, query: str, **kw: Any) -> set[int]:
    return {r["id"] for r in await store.search_messages(query, **kw)}


@pytest.fixture
async def corpus(store: StateStore) -> Corpus:
    c = Corpus(store)
    await store.create_session("cli1", "cli", model="model-cli", started_at=T0)
    await store.create_session("tg1", "telegram", model="model-tg", started_at=T0 + 100)
    await store.create_session("dc1", "discord", model="model-dc", started_at=T0 + 200)

    await c.add("before", "cli1", "user", "B" * 300)
    await c.add("docker_deploy", "cli1", "assistant", "Use docker for the deployment of the api service")
    await c.add("after", "cli1", "user", "thanks, that worked")
    await c.add("docker_only", "cli1", "user", "docker is installed but nothing else")
    await c.add("deploy_only", "cli1", "assistant", "the deployment is scheduled for friday")
    await c.add("deploying", "cli1", "user", "we are deploying tonight")
    await c.add("phrase", "cli1", "user", "this is an exact phrase in the middle")
    await c.add("phrase_reordered", "cli1", "user", "phrase that is exact but reordered")
    await c.add("chat_send", "cli1", "assistant", "call the chat-send tool to post it")
    await c.add("send_chat", "cli1", "user", "send a chat message later")

    await c.add("python_java", "tg1", "user", "python is nice but java is verbose")
    await c.add("python_only", "tg1", "assistant", "python scripts only")
    await c.add("kubernetes", "tg1", "user", "kubernetes cluster upgrade")
    await c.add("podman", "tg1", "assistant", "podman works rootless")
    await c.add("tool_docker", "tg1", "tool", "docker ps: 3 containers", tool_name="terminal", tool_call_id="c1")

    await c.add(
        "tool_name_hit", "dc1", "tool", "scan finished", tool_name="filesystem_scan", tool_call_id="c2"
    )
    await c.add(
        "tool_calls_hit",
        "dc1",
        "assistant",
        None,
        tool_calls=[{"id": "c3", "type": "function",
                     "function": {"name": "weather_lookup", "arguments": '{"city": "Reykjavik"}'}}],
    )
    await c.add("cjk", "dc1", "user", "我们讨论了机器学习的应用")
    await c.add("cjk_hello", "dc1", "user", "你好，今天天气不错")
    await c.add("cjk_hello_world", "dc1", "assistant", "你好世界")
    await c.add("cjk_world_only", "dc1", "user", "世界很大")
    return c


# ------------------------------------------------------------ FTS5 syntax


async def test_implicit_and(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "docker deployment") == {corpus.ids["docker_deploy"]}


async def test_exact_phrase(corpus: Corpus) -> None:
    assert await _ids(corpus.store, '"exact phrase"') == {corpus.ids["phrase"]}
    assert await _ids(corpus.store, "exact phrase") == {corpus.ids["phrase"], corpus.ids["phrase_reordered"]}


async def test_or(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "kubernetes OR podman") == {corpus.ids["kubernetes"], corpus.ids["podman"]}


async def test_not(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "python NOT java") == {corpus.ids["python_only"]}


async def test_prefix(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "deploy*") == {
        corpus.ids["docker_deploy"], corpus.ids["deploy_only"], corpus.ids["deploying"],
    }  # fmt: skip
    # "deploy" is no whole word of any message: it matches as a substring (below).
    assert await _ids(corpus.store, "deploy") == {
        corpus.ids["docker_deploy"], corpus.ids["deploy_only"], corpus.ids["deploying"],
    }  # fmt: skip


async def test_hyphenated_term_is_a_phrase(corpus: Corpus) -> None:
    # Unsanitized, FTS5 would read this as "chat NOT send"-ish syntax or fail.
    assert await _ids(corpus.store, "chat-send") == {corpus.ids["chat_send"]}


@pytest.mark.parametrize("query", ["", "   ", '"', "AND", "NOT OR", "***", "()", "-", '""'])
async def test_queries_with_nothing_searchable_return_nothing(corpus: Corpus, query: str) -> None:
    assert await corpus.store.search_messages(query) == []
    assert await corpus.store.search_sessions(query) == []


async def test_broken_syntax_is_sanitized_not_raised(corpus: Corpus) -> None:
    assert await _ids(corpus.store, 'docker "deployment') == {corpus.ids["docker_deploy"]}
    assert await _ids(corpus.store, "podman AND") == {corpus.ids["podman"]}
    assert await _ids(corpus.store, "(kubernetes") == {corpus.ids["kubernetes"]}


# ---------------------------------------------------------------- filters


async def test_source_filter(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "docker", source_filter=["telegram"]) == {corpus.ids["tool_docker"]}
    assert await _ids(corpus.store, "docker", source_filter=["cli"]) == {
        corpus.ids["docker_deploy"], corpus.ids["docker_only"],
    }  # fmt: skip
    assert await _ids(corpus.store, "docker", source_filter=["cli", "telegram"]) == {
        corpus.ids["docker_deploy"], corpus.ids["docker_only"], corpus.ids["tool_docker"],
    }  # fmt: skip


async def test_exclude_sources(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "docker", exclude_sources=["cli"]) == {corpus.ids["tool_docker"]}
    assert await _ids(corpus.store, "docker", exclude_sources=["telegram", "discord"]) == {
        corpus.ids["docker_deploy"], corpus.ids["docker_only"],
    }  # fmt: skip


async def test_role_filter(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "docker", role_filter=["user"]) == {corpus.ids["docker_only"]}
    assert await _ids(corpus.store, "docker", role_filter=["tool"]) == {corpus.ids["tool_docker"]}
    assert await _ids(corpus.store, "docker", role_filter=["user", "assistant"]) == {
        corpus.ids["docker_deploy"], corpus.ids["docker_only"],
    }  # fmt: skip


async def test_limit_and_offset(corpus: Corpus) -> None:
    everything = [r["id"] for r in await corpus.store.search_messages("docker", limit=10)]
    assert len(everything) == 3
    assert [r["id"] for r in await corpus.store.search_messages("docker", limit=2)] == everything[:2]
    assert [r["id"] for r in await corpus.store.search_messages("docker", limit=2, offset=2)] == everything[2:]


# ---------------------------------------------------------- result format


async def test_result_fields_snippet_and_context(corpus: Corpus) -> None:
    (hit,) = await corpus.store.search_messages("docker deployment")
    assert hit["id"] == corpus.ids["docker_deploy"]
    assert hit["session_id"] == "cli1"
    assert hit["role"] == "assistant"
    assert isinstance(hit["timestamp"], float)
    assert (hit["source"], hit["model"], hit["session_started"]) == ("cli", "model-cli", T0)
    assert ">>>docker<<<" in hit["snippet"] and ">>>deployment<<<" in hit["snippet"]

    before, after = hit["context"]
    assert before["id"] == corpus.ids["before"] and before["role"] == "user"
    assert before["content"] == "B" * 200 + "..."
    assert after["id"] == corpus.ids["after"]
    assert after["content"] == "thanks, that worked"


async def test_context_at_session_edges(store: StateStore) -> None:
    await store.create_session("s", "cli", started_at=T0)
    first = await store.append_message("s", "user", "alpha marker")
    mid = await store.append_message("s", "assistant", "middle")
    last = await store.append_message("s", "user", "omega marker")
    by_id = {r["id"]: r for r in await store.search_messages("marker")}
    assert [c["id"] for c in by_id[first]["context"]] == [mid]
    assert [c["id"] for c in by_id[last]["context"]] == [mid]


async def test_matches_in_tool_name_and_tool_calls_are_found(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "filesystem_scan") == {corpus.ids["tool_name_hit"]}
    assert await _ids(corpus.store, "weather_lookup") == {corpus.ids["tool_calls_hit"]}
    (hit,) = await corpus.store.search_messages("Reykjavik")
    assert hit["id"] == corpus.ids["tool_calls_hit"]
    assert ">>>Reykjavik<<<" in hit["snippet"]


# --------------------------------------------------------------- substrings


async def test_part_of_a_word_is_found_through_the_trigram_index(store: StateStore) -> None:
    """session-storage.md: the trigram index is "for CJK / substring search"."""
    await store.create_session("s", "cli", started_at=T0)
    net = await store.append_message("s", "user", "Fix the Docker networking issue")
    other = await store.append_message("s", "user", "the kubernetes cluster")
    hits = await store.search_messages("netw")
    assert [h["id"] for h in hits] == [net]
    assert ">>>netw<<<" in hits[0]["snippet"]
    assert await _ids(store, "NETWORK") == {net}  # case-insensitive, like the word index
    assert await _ids(store, "docker netw") == {net}  # one known word, one part of a word
    assert await _ids(store, "bernet OR netw") == {net, other}
    assert await _ids(store, "etwork") == {net}  # the middle of a word too
    (session,) = await store.search_sessions("netw")
    assert session["match_message_id"] == net and ">>>netw<<<" in session["snippet"]


async def test_substring_search_keeps_filters(store: StateStore) -> None:
    await store.create_session("s", "cli", started_at=T0)
    await store.create_session("t", "telegram", started_at=T0 + 1)
    mine = await store.append_message("s", "assistant", "networking fixed")
    await store.append_message("t", "user", "networking broken")
    assert await _ids(store, "netw", source_filter=["cli"]) == {mine}
    assert await _ids(store, "netw", role_filter=["assistant"]) == {mine}


async def test_whole_words_still_come_from_the_word_index(store: StateStore) -> None:
    """A word the index knows matches as a word: "net" is not found inside "network"."""
    await store.create_session("s", "cli", started_at=T0)
    word = await store.append_message("s", "user", "the net is down")
    await store.append_message("s", "user", "network trouble")
    assert await _ids(store, "net") == {word}


async def test_terms_shorter_than_a_trigram_are_never_substring_searched(store: StateStore) -> None:
    await store.create_session("s", "cli", started_at=T0)
    await store.append_message("s", "user", "networking")
    assert await _ids(store, "ne") == set()
    assert await _ids(store, "netw ki") == set()  # "ki" could never match in the trigram index


async def test_a_missing_word_after_not_does_not_switch_to_substrings(store: StateStore) -> None:
    await store.create_session("s", "cli", started_at=T0)
    net = await store.append_message("s", "user", "docker networking")
    # "netw" excludes nothing as a word; as a substring it would exclude the only hit.
    assert await _ids(store, "docker NOT netw") == {net}


# -------------------------------------------------------------------- CJK


@pytest.mark.parametrize(("query", "key"), [("机器学习", "cjk"), ("学习的", "cjk"), ("讨论了机器", "cjk")])
async def test_cjk_substring_search_via_trigram(corpus: Corpus, query: str, key: str) -> None:
    hits = await corpus.store.search_messages(query)
    assert [h["id"] for h in hits] == [corpus.ids[key]]
    assert f">>>{query}<<<" in hits[0]["snippet"].replace("<<<>>>", "")


async def test_two_character_cjk_query_is_found(corpus: Corpus) -> None:
    """"你好" is a whole word in Chinese; the trigram index cannot match fewer than 3 characters."""
    hits = await corpus.store.search_messages("你好")
    assert {h["id"] for h in hits} == {corpus.ids["cjk_hello"], corpus.ids["cjk_hello_world"]}
    for h in hits:
        assert ">>>你好<<<" in h["snippet"]
        assert h["source"] == "discord"


async def test_two_character_cjk_query_keeps_filters(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "你好", role_filter=["assistant"]) == {corpus.ids["cjk_hello_world"]}
    assert await _ids(corpus.store, "你好", source_filter=["cli"]) == set()


async def test_two_character_cjk_query_keeps_or_and_not(corpus: Corpus) -> None:
    assert await _ids(corpus.store, "你好 NOT 世界") == {corpus.ids["cjk_hello"]}
    assert await _ids(corpus.store, "天气 OR 世界") == {
        corpus.ids["cjk_hello"], corpus.ids["cjk_hello_world"], corpus.ids["cjk_world_only"],
    }  # fmt: skip


async def test_two_character_cjk_query_in_search_sessions(corpus: Corpus) -> None:
    results = await corpus.store.search_sessions("你好")
    assert [r["session_id"] for r in results] == ["dc1"]
    assert results[0]["match_message_id"] in {corpus.ids["cjk_hello"], corpus.ids["cjk_hello_world"]}


async def test_cjk_inside_tool_calls_is_found(store: StateStore) -> None:
    await store.create_session("s", "cli", started_at=T0)
    mid = await store.append_message(
        "s", "assistant", None,
        tool_calls=[{"id": "c1", "type": "function", "function": {"name": "translate", "arguments": '{"text": "你好吗朋友"}'}}],
    )  # fmt: skip
    assert await _ids(store, "好吗朋") == {mid}  # trigram
    assert await _ids(store, "你好") == {mid}  # two characters: below the trigram length


async def test_cjk_search_sessions(corpus: Corpus) -> None:
    (hit,) = await corpus.store.search_sessions("机器学习")
    assert (hit["session_id"], hit["match_message_id"]) == ("dc1", corpus.ids["cjk"])


# ---------------------------------------------------------- search_sessions


@dataclass
class Lineages:
    store: StateStore
    msgs: dict[str, list[int]]  # session id -> message ids in order
    roles: dict[int, str]


async def _conversation(store: StateStore, sid: str, n: int, hits: dict[int, str], roles: dict[int, str]) -> list[int]:
    """n messages alternating user/assistant; message i contains hits[i] if given."""
    ids = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        mid = await store.append_message(sid, role, f"{sid} message {i} {hits.get(i, '')}".strip())
        roles[mid] = role
        ids.append(mid)
    return ids


@pytest.fixture
async def lineages(store: StateStore) -> Lineages:
    roles: dict[int, str] = {}
    await store.create_session("root", "cli", started_at=T0)
    await store.create_session("cont", "cli", parent_session_id="root", started_at=T0 + 100)
    await store.create_session("other", "telegram", started_at=T0 + 200)
    await store.set_session_title("root", "Auth")
    await store.set_session_title("cont", "Auth #2")
    msgs = {
        "root": await _conversation(store, "root", 14, {7: "oauth"}, roles),
        "cont": await _conversation(store, "cont", 6, {2: "oauth oauth"}, roles),
        "other": await _conversation(store, "other", 12, {0: "oauth"}, roles),
    }
    # Tool output inside the window but outside the bookends (tools are not user+assistant).
    tool = await store.append_message("root", "tool", "oauth refresh log zythum", tool_name="terminal")
    roles[tool] = "tool"
    msgs["root"].append(tool)
    return Lineages(store, msgs, roles)


async def test_search_sessions_one_result_per_lineage(lineages: Lineages) -> None:
    results = await lineages.store.search_sessions("oauth", limit=10)
    sessions = [r["session_id"] for r in results]
    assert len(sessions) == 2
    assert "other" in sessions
    assert len({"root", "cont"} & set(sessions)) == 1


async def test_search_sessions_result_shape(lineages: Lineages) -> None:
    results = await lineages.store.search_sessions("oauth", limit=10, sort="oldest")
    root = results[0]
    assert root["session_id"] == "root"
    assert (root["title"], root["source"], root["when"]) == ("Auth", "cli", T0)
    ids = lineages.msgs["root"]
    anchor = ids[7]
    assert root["match_message_id"] == anchor
    assert ">>>oauth<<<" in root["snippet"]

    assert [m["id"] for m in root["bookend_start"]] == ids[:3]
    assert [m["id"] for m in root["bookend_end"]] == ids[11:14]  # the tool message is not a bookend
    assert all(m["role"] in ("user", "assistant") for m in root["bookend_start"] + root["bookend_end"])
    assert root["bookend_start"][0]["content"] == "root message 0"

    # ±5 around the match, the anchor flagged once.
    assert [m["id"] for m in root["messages"]] == ids[2:13]
    assert [m["id"] for m in root["messages"] if m["anchor"]] == [anchor]
    assert (root["messages_before"], root["messages_after"]) == (5, 5)


async def test_search_sessions_window_at_session_start(lineages: Lineages) -> None:
    results = await lineages.store.search_sessions("oauth", limit=10, sort="newest")
    other = results[0]
    assert other["session_id"] == "other"
    ids = lineages.msgs["other"]
    assert other["match_message_id"] == ids[0]
    assert [m["id"] for m in other["messages"]] == ids[:6]
    assert (other["messages_before"], other["messages_after"]) == (0, 5)
    assert [m["id"] for m in other["bookend_start"]] == ids[:3]
    assert [m["id"] for m in other["bookend_end"]] == ids[9:12]


async def test_search_sessions_sort(lineages: Lineages) -> None:
    newest = [r["session_id"] for r in await lineages.store.search_sessions("oauth", limit=10, sort="newest")]
    oldest = [r["session_id"] for r in await lineages.store.search_sessions("oauth", limit=10, sort="oldest")]
    # Newest: the continuation stands for its lineage; oldest: the root does.
    assert newest == ["other", "cont"]
    assert oldest == ["root", "other"]


async def test_search_sessions_limit(lineages: Lineages) -> None:
    assert len(await lineages.store.search_sessions("oauth", limit=1)) == 1
    assert len(await lineages.store.search_sessions("oauth")) == 2  # default limit 3, two lineages


async def test_search_sessions_default_roles_skip_tool_output(lineages: Lineages) -> None:
    assert await lineages.store.search_sessions("zythum") == []
    (hit,) = await lineages.store.search_sessions("zythum", role_filter=("user", "assistant", "tool"))
    assert hit["session_id"] == "root"
    assert hit["match_message_id"] == lineages.msgs["root"][-1]
    assert (hit["messages_before"], hit["messages_after"]) == (5, 0)


async def test_search_sessions_source_filter_and_exclusion(lineages: Lineages) -> None:
    only_tg = await lineages.store.search_sessions("oauth", source_filter=["telegram"])
    assert [r["session_id"] for r in only_tg] == ["other"]
    without_other = await lineages.store.search_sessions("oauth", exclude_session_ids=["other"])
    assert [r["session_id"] for r in without_other] in (["root"], ["cont"])


async def test_search_sessions_finds_a_lineage_behind_many_filtered_hits(store: StateStore) -> None:
    """Filters and lineage dedupe must not be applied after a fixed cut of FTS hits.

    A session whose tool output mentions a word hundreds of times must not hide
    the only user message that mentions it elsewhere.
    """
    await store.create_session("noisy", "cli", started_at=T0)
    for _ in range(250):
        await store.append_message("noisy", "tool", "oauth token refreshed oauth", tool_name="terminal")
    await store.create_session("quiet", "cli", started_at=T0 + 1)
    quiet = await store.append_message(
        "quiet", "user", "we discussed many things today, among them the oauth provider migration and more"
    )
    (hit,) = await store.search_sessions("oauth")
    assert (hit["session_id"], hit["match_message_id"]) == ("quiet", quiet)

    both = await store.search_sessions("oauth", role_filter=("user", "assistant", "tool"), limit=3)
    assert {r["session_id"] for r in both} == {"noisy", "quiet"}


# ---------------------------------------------------------- messages_around


async def test_messages_around_scrolls(store: StateStore) -> None:
    await store.create_session("s", "cli", started_at=T0)
    await store.create_session("x", "cli", started_at=T0)
    ids = []
    for i in range(30):
        ids.append(await store.append_message("s", "user" if i % 2 == 0 else "assistant", f"m{i}"))
        await store.append_message("x", "user", f"interleaved {i}")  # another session's rows in between

    page = await store.messages_around("s", ids[15], window=10)
    assert page["session_id"] == "s" and page["around_message_id"] == ids[15]
    assert [m["id"] for m in page["messages"]] == ids[5:26]
    assert [m["content"] for m in page["messages"]][:2] == ["m5", "m6"]
    assert [m["id"] for m in page["messages"] if m["anchor"]] == [ids[15]]
    assert (page["messages_before"], page["messages_after"]) == (10, 10)

    # Scroll forward: feed messages[-1].id back; the end of the session shows as a short side.
    forward = await store.messages_around("s", page["messages"][-1]["id"], window=10)
    assert [m["id"] for m in forward["messages"]] == ids[15:30]
    assert (forward["messages_before"], forward["messages_after"]) == (10, 4)

    # Scroll back to the start.
    back = await store.messages_around("s", page["messages"][0]["id"], window=10)
    assert [m["id"] for m in back["messages"]] == ids[0:16]
    assert (back["messages_before"], back["messages_after"]) == (5, 10)

    first = await store.messages_around("s", ids[0], window=3)
    assert [m["id"] for m in first["messages"]] == ids[0:4]
    assert (first["messages_before"], first["messages_after"]) == (0, 3)
    last = await store.messages_around("s", ids[-1], window=3)
    assert [m["id"] for m in last["messages"]] == ids[26:30]
    assert (last["messages_before"], last["messages_after"]) == (3, 0)


async def test_messages_around_default_window_is_10(store: StateStore) -> None:
    await store.create_session("s", "cli", started_at=T0)
    ids = [await store.append_message("s", "user", f"m{i}") for i in range(40)]
    page = await store.messages_around("s", ids[20])
    assert [m["id"] for m in page["messages"]] == ids[10:31]


# ---------------------------------------------------------------- ownership


async def test_an_owner_keeps_only_the_sessions_that_chat_may_resume(store: StateStore) -> None:
    """The /resume rule (storage.ownership) as a search filter: the key's sessions; in the
    terminal, also those of the same login."""
    for sid, key, platform, user in (("a", "agent:main:telegram:dm:alice", "telegram", "alice"),
                                     ("b", "agent:main:telegram:dm:bob", "telegram", "bob"),
                                     ("t", "agent:main:cli:dm:t1", "cli", "me")):
        await store.create_session(sid, platform, user_id=user, started_at=T0)
        await store.append_message(sid, "user", f"zebra crossing in {sid}")
        await store.write(lambda c, k=key, s=sid, p=platform, u=user: bindings.bind(
            c, k, s, platform=p, chat_id=u, chat_type="dm", thread_id=None, user_id=u, now=T0))
    alice = ChatOwner("agent:main:telegram:dm:alice", "telegram", "alice")
    other_terminal = ChatOwner("agent:main:cli:dm:t2", "cli", "me")
    assert {h["session_id"] for h in await store.search_messages("zebra", owner=alice)} == {"a"}
    assert [h["session_id"] for h in await store.search_sessions("zebra", owner=alice)] == ["a"]
    assert [r["id"] for r in await store.recent_sessions(owner=alice)] == ["a"]
    assert [h["session_id"] for h in await store.search_sessions("zebr", owner=other_terminal)] == ["t"]
    assert len(await store.search_messages("zebra")) == 3  # no owner: every session
