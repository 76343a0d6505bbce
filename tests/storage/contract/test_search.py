"""search_messages, search_sessions (discovery) and messages_around (scroll): the same answers
from state.db and from PostgreSQL (the behaviours of tests/storage/test_search.py that are about
results, not about either index's insides)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ._search_corpus import (
    T0,
    ids,
    message,
    search_messages,
    search_sessions,
    session,
    supersede,
)
from .conftest import Db


@dataclass
class Corpus:
    db: Db
    ids: dict[str, int] = field(default_factory=dict)

    async def add(self, key: str, sid: str, role: str, content: str | None, **kw: object) -> int:
        mid = await message(self.db, sid, role, content, **kw)  # type: ignore[arg-type]
        self.ids[key] = mid
        return mid


@pytest.fixture
async def corpus(db: Db) -> Corpus:
    c = Corpus(db)
    await session(db, "cli1", "cli", model="model-cli", started_at=T0)
    await session(db, "tg1", "telegram", model="model-tg", started_at=T0 + 100)
    await session(db, "dc1", "discord", model="model-dc", started_at=T0 + 200)

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

    await c.add("tool_name_hit", "dc1", "tool", "scan finished", tool_name="filesystem_scan", tool_call_id="c2")
    await c.add("tool_calls_hit", "dc1", "assistant", None, tool_calls=[
        {"id": "c3", "type": "function", "function": {"name": "weather_lookup", "arguments": '{"city": "Reykjavik"}'}}])
    await c.add("cjk", "dc1", "user", "我们讨论了机器学习的应用")
    await c.add("cjk_hello", "dc1", "user", "你好，今天天气不错")
    await c.add("cjk_hello_world", "dc1", "assistant", "你好世界")
    await c.add("cjk_world_only", "dc1", "user", "世界很大")
    return c


# ------------------------------------------------------------ the query language


async def test_implicit_and(corpus: Corpus) -> None:
    assert await ids(corpus.db, "docker deployment") == {corpus.ids["docker_deploy"]}


async def test_exact_phrase(corpus: Corpus) -> None:
    assert await ids(corpus.db, '"exact phrase"') == {corpus.ids["phrase"]}
    assert await ids(corpus.db, "exact phrase") == {corpus.ids["phrase"], corpus.ids["phrase_reordered"]}


async def test_or_and_not(corpus: Corpus) -> None:
    assert await ids(corpus.db, "kubernetes OR podman") == {corpus.ids["kubernetes"], corpus.ids["podman"]}
    assert await ids(corpus.db, "python NOT java") == {corpus.ids["python_only"]}


async def test_fts5_precedence_adjacent_terms_bind_before_not(corpus: Corpus) -> None:
    # FTS5 reads "python NOT java verbose" as python NOT (java verbose): one message has both.
    assert await ids(corpus.db, "python NOT java verbose") == {corpus.ids["python_only"]}
    assert await ids(corpus.db, "python NOT nothing verbose") == {corpus.ids["python_java"], corpus.ids["python_only"]}
    # NOT binds before OR: podman OR (python NOT java)
    assert await ids(corpus.db, "podman OR python NOT java") == {corpus.ids["podman"], corpus.ids["python_only"]}


async def test_prefix_and_a_part_of_a_word(corpus: Corpus) -> None:
    deploys = {corpus.ids["docker_deploy"], corpus.ids["deploy_only"], corpus.ids["deploying"]}
    assert await ids(corpus.db, "deploy*") == deploys
    # "deploy" is no whole word of any message: it matches as a substring.
    assert await ids(corpus.db, "deploy") == deploys


async def test_hyphenated_term_is_a_phrase(corpus: Corpus) -> None:
    assert await ids(corpus.db, "chat-send") == {corpus.ids["chat_send"]}


@pytest.mark.parametrize("query", ["", "   ", '"', "AND", "NOT OR", "***", "()", "-", '""'])
async def test_queries_with_nothing_searchable_return_nothing(corpus: Corpus, query: str) -> None:
    assert await search_messages(corpus.db, query) == []
    assert await search_sessions(corpus.db, query) == []


async def test_broken_syntax_is_sanitized_not_raised(corpus: Corpus) -> None:
    assert await ids(corpus.db, 'docker "deployment') == {corpus.ids["docker_deploy"]}
    assert await ids(corpus.db, "podman AND") == {corpus.ids["podman"]}
    assert await ids(corpus.db, "(kubernetes") == {corpus.ids["kubernetes"]}


@pytest.mark.parametrize("query", [
    "'; DROP TABLE messages; --", "docker' OR '1'='1", "docker & !podman", "docker:* | podman", "<-> docker",
    "docker\\", "%", "_", "docker%", "\x00docker", "\ud800docker", "a" * 5000, "docker " * 300,
    "NEAR(docker podman)", "content:docker", "{docker}", "docker^", "!!!", "'", "\\'",
])
async def test_hostile_queries_are_never_errors(corpus: Corpus, query: str) -> None:
    found = await ids(corpus.db, query)
    assert found <= set(corpus.ids.values())
    await search_sessions(corpus.db, query)
    assert len(await ids(corpus.db, "docker")) == 3  # the table is still there


async def test_like_wildcards_in_a_substring_are_literal(db: Db) -> None:
    await session(db, "s", "cli")
    pct = await message(db, "s", "user", "a discount of 100% today")
    await message(db, "s", "user", "a discount of 1000 today")
    assert await ids(db, "100%") == {pct}
    assert await ids(db, "0%") == set()  # two characters: too short for a substring


# ---------------------------------------------------------------- filters


async def test_source_exclude_and_role_filters(corpus: Corpus) -> None:
    i = corpus.ids
    assert await ids(corpus.db, "docker", source_filter=["telegram"]) == {i["tool_docker"]}
    assert await ids(corpus.db, "docker", source_filter=["cli"]) == {i["docker_deploy"], i["docker_only"]}
    assert await ids(corpus.db, "docker", exclude_sources=["cli"]) == {i["tool_docker"]}
    assert await ids(corpus.db, "docker", exclude_sources=["telegram", "discord"]) == {i["docker_deploy"],
                                                                                     i["docker_only"]}
    assert await ids(corpus.db, "docker", role_filter=["user"]) == {i["docker_only"]}
    assert await ids(corpus.db, "docker", role_filter=["tool"]) == {i["tool_docker"]}


async def test_limit_and_offset(corpus: Corpus) -> None:
    everything = [r["id"] for r in await search_messages(corpus.db, "docker", limit=10)]
    assert len(everything) == 3
    assert [r["id"] for r in await search_messages(corpus.db, "docker", limit=2)] == everything[:2]
    assert [r["id"] for r in await search_messages(corpus.db, "docker", limit=2, offset=2)] == everything[2:]


async def test_superseded_answers_are_not_found(db: Db) -> None:
    await session(db, "s", "cli")
    await message(db, "s", "user", "tell me about zebras")
    old = await message(db, "s", "assistant", "zebras have stripes (first answer)")
    new = await message(db, "s", "assistant", "zebras have stripes (second answer)")
    await supersede(db, "s", old)
    assert await ids(db, "stripes") == {new}
    (hit,) = await search_sessions(db, "stripes")
    assert hit["match_message_id"] == new


async def test_superseded_best_hits_give_way_to_the_kept_ones(db: Db) -> None:
    # the superseded answers rank first (short, the word twice): discovery must look past all of them
    await session(db, "retried", "cli", started_at=T0)
    for _ in range(120):
        await supersede(db, "retried", await message(db, "retried", "assistant", "stripes stripes"))
    kept = await message(db, "retried", "assistant", "zebras have stripes, and each zebra's stripes differ")
    await session(db, "other", "cli", started_at=T0 + 1)
    other = await message(db, "other", "user", "a shirt with stripes, which I wore to the zoo to see the zebras")
    found = [(r["session_id"], r["match_message_id"]) for r in await search_sessions(db, "stripes", limit=5)]
    assert found == [("retried", kept), ("other", other)]


# ---------------------------------------------------------- result format


async def test_result_fields_snippet_and_context(corpus: Corpus) -> None:
    (hit,) = await search_messages(corpus.db, "docker deployment")
    assert hit["id"] == corpus.ids["docker_deploy"]
    assert (hit["session_id"], hit["role"]) == ("cli1", "assistant")
    assert isinstance(hit["timestamp"], float)
    assert (hit["source"], hit["model"], hit["session_started"]) == ("cli", "model-cli", T0)
    assert ">>>docker<<<" in hit["snippet"] and ">>>deployment<<<" in hit["snippet"]
    before, after = hit["context"]
    assert before["id"] == corpus.ids["before"] and before["role"] == "user"
    assert before["content"] == "B" * 200 + "..."
    assert (after["id"], after["content"]) == (corpus.ids["after"], "thanks, that worked")
    assert set(hit) == {"id", "session_id", "role", "timestamp", "source", "model", "session_started", "snippet",
                        "context"}


async def test_context_at_session_edges(db: Db) -> None:
    await session(db, "s", "cli")
    first = await message(db, "s", "user", "alpha marker")
    mid = await message(db, "s", "assistant", "middle")
    last = await message(db, "s", "user", "omega marker")
    by_id = {r["id"]: r for r in await search_messages(db, "marker")}
    assert [c["id"] for c in by_id[first]["context"]] == [mid]
    assert [c["id"] for c in by_id[last]["context"]] == [mid]


async def test_matches_in_tool_name_and_tool_calls_are_found(corpus: Corpus) -> None:
    assert await ids(corpus.db, "filesystem_scan") == {corpus.ids["tool_name_hit"]}
    assert await ids(corpus.db, "weather_lookup") == {corpus.ids["tool_calls_hit"]}
    (hit,) = await search_messages(corpus.db, "Reykjavik")
    assert hit["id"] == corpus.ids["tool_calls_hit"]
    assert ">>>Reykjavik<<<" in hit["snippet"]


# --------------------------------------------------------------- substrings


async def test_part_of_a_word_is_found_through_the_substring_index(db: Db) -> None:
    await session(db, "s", "cli")
    net = await message(db, "s", "user", "Fix the Docker networking issue")
    other = await message(db, "s", "user", "the kubernetes cluster")
    hits = await search_messages(db, "netw")
    assert [h["id"] for h in hits] == [net]
    assert ">>>netw<<<" in hits[0]["snippet"]
    assert await ids(db, "NETWORK") == {net}  # case-insensitive, like the word index
    assert await ids(db, "docker netw") == {net}  # one known word, one part of a word
    assert await ids(db, "bernet OR netw") == {net, other}
    assert await ids(db, "etwork") == {net}
    (found,) = await search_sessions(db, "netw")
    assert found["match_message_id"] == net and ">>>netw<<<" in found["snippet"]


async def test_substring_search_keeps_filters(db: Db) -> None:
    await session(db, "s", "cli")
    await session(db, "t", "telegram", started_at=T0 + 1)
    mine = await message(db, "s", "assistant", "networking fixed")
    await message(db, "t", "user", "networking broken")
    assert await ids(db, "netw", source_filter=["cli"]) == {mine}
    assert await ids(db, "netw", role_filter=["assistant"]) == {mine}


async def test_whole_words_still_come_from_the_word_index(db: Db) -> None:
    await session(db, "s", "cli")
    word = await message(db, "s", "user", "the net is down")
    await message(db, "s", "user", "network trouble")
    assert await ids(db, "net") == {word}


async def test_a_whole_word_outside_the_filters_finds_no_substrings_inside_them(db: Db) -> None:
    # "net" is a word in telegram's session only: the cli session's "network" is no hit, filtered or not
    await session(db, "s", "cli")
    await session(db, "t", "telegram", started_at=T0 + 1)
    await message(db, "s", "user", "network trouble")
    word = await message(db, "t", "user", "the net is down")
    assert await ids(db, "net", source_filter=["cli"]) == set()
    assert await search_sessions(db, "net", source_filter=["cli"]) == []
    assert [r["match_message_id"] for r in await search_sessions(db, "net")] == [word]


async def test_terms_shorter_than_a_trigram_are_never_substring_searched(db: Db) -> None:
    await session(db, "s", "cli")
    await message(db, "s", "user", "networking")
    assert await ids(db, "ne") == set()
    assert await ids(db, "netw ki") == set()


async def test_a_missing_word_after_not_does_not_switch_to_substrings(db: Db) -> None:
    await session(db, "s", "cli")
    net = await message(db, "s", "user", "docker networking")
    assert await ids(db, "docker NOT netw") == {net}


async def test_tool_results_hold_whole_words_but_no_substrings(db: Db) -> None:
    """Both backends leave tool results out of the substring index (bench/README.md, issue 25)."""
    await session(db, "s", "cli")
    tool = await message(db, "s", "tool", "the firewall blocked port 8443", tool_name="terminal")
    assert await ids(db, "firewall") == {tool}
    assert await ids(db, "firewa") == set()


# -------------------------------------------------------------------- CJK


@pytest.mark.parametrize("query", ["机器学习", "学习的", "讨论了机器"])
async def test_cjk_substring_search(corpus: Corpus, query: str) -> None:
    hits = await search_messages(corpus.db, query)
    assert [h["id"] for h in hits] == [corpus.ids["cjk"]]
    assert f">>>{query}<<<" in hits[0]["snippet"].replace("<<<>>>", "")


async def test_two_character_cjk_queries(corpus: Corpus) -> None:
    i = corpus.ids
    hits = await search_messages(corpus.db, "你好")
    assert {h["id"] for h in hits} == {i["cjk_hello"], i["cjk_hello_world"]}
    assert all(">>>你好<<<" in h["snippet"] and h["source"] == "discord" for h in hits)
    assert await ids(corpus.db, "你好", role_filter=["assistant"]) == {i["cjk_hello_world"]}
    assert await ids(corpus.db, "你好", source_filter=["cli"]) == set()
    assert await ids(corpus.db, "你好 NOT 世界") == {i["cjk_hello"]}
    assert await ids(corpus.db, "天气 OR 世界") == {i["cjk_hello"], i["cjk_hello_world"], i["cjk_world_only"]}
    results = await search_sessions(corpus.db, "你好")
    assert [r["session_id"] for r in results] == ["dc1"]
    assert results[0]["match_message_id"] in {i["cjk_hello"], i["cjk_hello_world"]}


async def test_cjk_inside_tool_calls_is_found(db: Db) -> None:
    await session(db, "s", "cli")
    mid = await message(db, "s", "assistant", None, tool_calls=[
        {"id": "c1", "type": "function", "function": {"name": "translate", "arguments": '{"text": "你好吗朋友"}'}}])
    assert await ids(db, "好吗朋") == {mid}
    assert await ids(db, "你好") == {mid}


async def test_cjk_search_sessions(corpus: Corpus) -> None:
    (hit,) = await search_sessions(corpus.db, "机器学习")
    assert (hit["session_id"], hit["match_message_id"]) == ("dc1", corpus.ids["cjk"])


async def test_a_huge_message_is_stored_and_found(db: Db) -> None:
    """A tool result of 60 000 distinct words (a tsvector holds at most 1 MB): the INSERT never fails.
    PostgreSQL's word index holds a message's first 100 000 characters (README, "Search on
    PostgreSQL"); state.db's holds all of it."""
    await session(db, "s", "cli")
    text = " ".join(f"w{i}x" for i in range(60_000))
    mid = await message(db, "s", "tool", text, tool_name="terminal")
    assert await ids(db, "w5x") == {mid}
    assert await ids(db, "w59999x") == ({mid} if db.name == "sqlite" else set())


async def test_accents_are_folded_by_state_db_only(db: Db) -> None:
    """The one listed difference in words (README, "Search on PostgreSQL"): unicode61 folds accents."""
    await session(db, "s", "cli")
    mid = await message(db, "s", "user", "an odd feeling of déjà vu")
    assert await ids(db, "déjà") == {mid}
    assert await ids(db, "deja") == ({mid} if db.name == "sqlite" else set())
