"""The learning loop across fresh agents, and auto-title."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from core.errors import ModelError
from core.learning import MEMORY_REVIEW_PROMPT, SKILL_REVIEW_PROMPT, meta_key
from storage import StateStore
from tests.fakes.openai_server import FakeOpenAI

from ._agent_env import (
    KEY,
    db_messages,
    db_rows,
    make_client,
    make_runtime,
    new_session,
    request,
    sample_tools,
)


async def _counters(store: StateStore) -> dict[str, int]:
    raw = await store.get_meta(meta_key(KEY))
    assert raw is not None
    return dict(json.loads(raw))


async def test_memory_nudge_fires_across_fresh_agents_and_runtimes(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    fake_openai.reply("first answer")
    async with make_client(fake_openai) as client:
        # A new runtime per message: nothing but state.db carries the counters (as across a restart).
        rt1 = make_runtime(store, client, tmp_path, tools=sample_tools(), memory_nudge_interval=2)
        await rt1.agent(request("I prefer metric units")).run_turn(request("I prefer metric units"))
        await rt1.background.join(30)
        assert len(fake_openai.chat_requests) == 1
        assert await _counters(store) == {"turns_since_memory": 1, "iters_since_skill": 0}

        fake_openai.reply("second answer")
        fake_openai.reply_tool_calls([{"name": "memory", "arguments": {"action": "add", "target": "user",
                                                                        "content": "Prefers metric units."}}])
        fake_openai.reply("saved")
        rt2 = make_runtime(store, client, tmp_path, tools=sample_tools(), memory_nudge_interval=2)
        result = await rt2.agent(request("thanks")).run_turn(request("thanks"))
        assert result.text == "second answer"  # the reply did not wait for the review
        await rt2.background.join(30)
    assert rt2.background.pending == 0
    review = fake_openai.chat_requests[2].body
    assert review["messages"][-1] == {"role": "user", "content": MEMORY_REVIEW_PROMPT}
    assert [m["content"] for m in review["messages"][1:-1]] == ["I prefer metric units", "first answer",
                                                                  "thanks", "second answer"]
    assert {t["function"]["name"] for t in review["tools"]} == {"memory", "skills_list", "skill_view",
                                                                 "skill_manage"}
    assert len(fake_openai.chat_requests) == 4  # the review's own loop: call, then its answer
    assert "Prefers metric units." in (tmp_path / "memories" / "USER.md").read_text()
    # The review is not part of the conversation, and has no nudges of its own.
    assert [m["content"] for m in db_messages(db_path, "s1")] == ["I prefer metric units", "first answer",
                                                                   "thanks", "second answer"]
    assert await _counters(store) == {"turns_since_memory": 0, "iters_since_skill": 0}


async def test_using_the_memory_tool_resets_the_counter(store: StateStore, fake_openai: FakeOpenAI,
                                                        tmp_path: Path) -> None:
    await new_session(store)
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), memory_nudge_interval=2)
        await rt.agent(request("a")).run_turn(request("a"))
        fake_openai.reply_tool_calls([{"name": "memory", "arguments": {"action": "add", "target": "memory",
                                                                        "content": "Project uses uv."}}])
        fake_openai.reply("noted")
        await rt.agent(request("b")).run_turn(request("b"))
        assert await _counters(store) == {"turns_since_memory": 0, "iters_since_skill": 1}
        await rt.agent(request("c")).run_turn(request("c"))
        await rt.background.join(30)
    assert len(fake_openai.chat_requests) == 4  # no review yet
    assert await _counters(store) == {"turns_since_memory": 1, "iters_since_skill": 1}


async def test_a_turn_without_a_stored_answer_is_not_counted(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    # The counters advance in the answer's own transaction: no answer, no tick.
    await new_session(store)
    fake_openai.reply("one")
    fake_openai.fail(400, {"error": {"message": "bad request"}})
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), memory_nudge_interval=5)
        await rt.agent(request("first")).run_turn(request("first"))
        assert await _counters(store) == {"turns_since_memory": 1, "iters_since_skill": 0}
        with pytest.raises(ModelError, match="bad request"):
            await rt.agent(request("second")).run_turn(request("second"))
    assert await _counters(store) == {"turns_since_memory": 1, "iters_since_skill": 0}
    assert [m["content"] for m in db_messages(db_path, "s1")] == ["first", "one", "second"]


async def test_skill_nudge_after_tool_iterations(store: StateStore, fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store)
    for i in range(3):
        fake_openai.reply_tool_calls([{"name": "echo", "arguments": {"text": str(i)}}])
    fake_openai.reply("built it")
    fake_openai.reply_tool_calls([{"name": "skills_list"}])
    fake_openai.reply_tool_calls([{"name": "skills_list"}])
    fake_openai.reply("never reached: the review has 2 iterations")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), skill_nudge_interval=3,
                          review_max_iterations=2)
        await rt.agent(request("build")).run_turn(request("build"))
        await rt.background.join(30)
    reviews = fake_openai.chat_requests[4:]
    assert len(reviews) == 2
    assert reviews[0].body["messages"][-1]["content"] == SKILL_REVIEW_PROMPT
    assert await _counters(store) == {"turns_since_memory": 1, "iters_since_skill": 0}


async def test_auto_title_once_after_the_first_exchange(store: StateStore, db_path: Path,
                                                        fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store)
    fake_openai.reply("Sure, May is lovely.")
    fake_openai.reply('Title: "Planning a Trip to Oslo."')
    fake_openai.reply("second")
    async with make_client(fake_openai, auxiliary="aux-model") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), auto_title=True)
        await rt.agent(request("Oslo in May?")).run_turn(request("Oslo in May?"))
        await rt.background.join(30)
        await rt.agent(request("more")).run_turn(request("more"))
        await rt.background.join(30)
    assert len(fake_openai.chat_requests) == 3
    title_request = fake_openai.chat_requests[1].body
    assert title_request["model"] == "aux-model" and "Oslo in May?" in title_request["messages"][1]["content"]
    assert db_rows(db_path, "SELECT title FROM sessions") == [("Planning a Trip to Oslo",)]


async def test_the_title_call_is_booked_on_the_session(store: StateStore, fake_openai: FakeOpenAI,
                                                      tmp_path: Path) -> None:
    await new_session(store)
    fake_openai.reply("Sure.", usage={"prompt_tokens": 40, "completion_tokens": 2})
    fake_openai.reply("Oslo in May", usage={"prompt_tokens": 70, "completion_tokens": 3})
    async with make_client(fake_openai, auxiliary="aux-model") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), auto_title=True)
        await rt.agent(request("Oslo in May?")).run_turn(request("Oslo in May?"))
        await rt.background.join(30)
    s = await store.get_session("s1")
    assert s is not None and s["title"] == "Oslo in May"
    assert (s["api_call_count"], s["input_tokens"], s["output_tokens"]) == (2, 110, 5)


async def test_auto_title_collision_gets_a_lineage_number(store: StateStore, db_path: Path,
                                                          fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    await new_session(store, "older", title="Oslo Trip")
    await new_session(store)
    fake_openai.reply("answer").reply("Oslo Trip")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), auto_title=True)
        await rt.agent(request("hi")).run_turn(request("hi"))
        await rt.background.join(30)
    assert db_rows(db_path, "SELECT title FROM sessions WHERE id = 's1'") == [("Oslo Trip #2",)]


async def test_a_title_set_by_hand_wins(store: StateStore, db_path: Path, fake_openai: FakeOpenAI,
                                        tmp_path: Path) -> None:
    await new_session(store, title="Mine")
    await new_session(store, "s2")

    def hand_titles_meanwhile(body: dict[str, Any]) -> str:
        # While the title is being generated, the user runs /title (another connection, as the CLI would).
        with sqlite3.connect(db_path) as conn:
            conn.execute("UPDATE sessions SET title = 'By hand' WHERE id = 's2'")
        return "Generated Title"

    fake_openai.responder = hand_titles_meanwhile
    fake_openai.reply("one").reply("two")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools(), auto_title=True)
        await rt.agent(request("x")).run_turn(request("x"))  # titled before: no title request
        await rt.background.join(30)
        assert len(fake_openai.chat_requests) == 1
        await rt.agent(request("y", "s2")).run_turn(request("y", "s2"))
        await rt.background.join(30)
    assert len(fake_openai.chat_requests) == 3
    assert db_rows(db_path, "SELECT id, title FROM sessions ORDER BY id") == [("s1", "Mine"), ("s2", "By hand")]


async def test_memory_flush_before_a_session_ends(store: StateStore, db_path: Path, fake_openai: FakeOpenAI,
                                                  tmp_path: Path) -> None:
    await new_session(store)
    await store.persist_message("s1", {"role": "user", "content": "my cat is called Miso"})
    await store.persist_message("s1", {"role": "assistant", "content": "Lovely name."})
    fake_openai.reply_tool_calls([{"name": "memory", "arguments": {"action": "add", "target": "user",
                                                                    "content": "Has a cat called Miso."}}])
    fake_openai.reply("saved")
    async with make_client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        assert await rt.memory_flush("s1") is True
    flush = fake_openai.chat_requests[0].body
    assert [t["function"]["name"] for t in flush["tools"]] == ["memory"]
    assert "Save anything worth remembering" in flush["messages"][-1]["content"]
    assert "Has a cat called Miso." in (tmp_path / "memories" / "USER.md").read_text()
    assert len(db_messages(db_path, "s1")) == 2  # the flush exchange is not part of the conversation
