"""Tool calls written as text by local models: the agent against FakeOpenAI refusing ``tools`` the way
Ollama and llama.cpp do, a real state.db and the real memory tool writing its file."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from core.errors import ModelError
from core.llm import ModelClient, ModelSettings
from storage import StateStore
from tests.fakes._openai_local import TEXT_FORMS, TextForm, text_call
from tests.fakes.openai_server import FakeOpenAI

from ._agent_env import assert_consistent, db_messages, make_runtime, new_session, request, sample_tools
from ._listener import RecordingListener

FACT = "Alice keeps bees on the roof."
MEMORY_ARGS = {"action": "add", "target": "user", "content": FACT}


def _client(fake: FakeOpenAI, *, tool_format: str = "auto", model: str = "gemma3:4b") -> ModelClient:
    return ModelClient(ModelSettings(base_url=fake.base_url, model=model, max_retries=2, backoff_base=0.0,
                                     backoff_max=0.0, timeout=30, tool_format=tool_format))


def _full_messages(db: Path, session_id: str) -> list[dict[str, Any]]:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM messages WHERE session_id = ? ORDER BY id", (session_id,)).fetchall()
    return [dict(r) for r in rows]


def _shown_anywhere(listener: RecordingListener) -> str:
    return "".join(listener.deltas)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("form", TEXT_FORMS)
async def test_a_server_refusing_tools_gets_them_as_text_and_the_memory_call_goes_through(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path, form: TextForm, streamed: bool
) -> None:
    fake_openai.refuse_tools = "ollama" if form in ("tag", "gemma", "fenced") else "llamacpp"
    await new_session(store)
    fake_openai.reply(f"I will remember that.\n{text_call(form, 'memory', MEMORY_ARGS)}")
    fake_openai.reply("Noted: bees on the roof.")
    listener = RecordingListener()
    turn = request("Remember that I keep bees on the roof.")
    if streamed:
        turn = dataclasses.replace(turn, listener=listener)
    async with _client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(turn).run_turn(turn)
        assert client.tool_formats.of("gemma3:4b") == "text"

        assert result.text == "Noted: bees on the roof."
        assert FACT in (tmp_path / "memories" / "USER.md").read_text()
        refused, first, second = fake_openai.chat_requests
        assert "tools" in refused.body
        # Text mode: no tools field; the schemas are in the system prompt.
        assert "tools" not in first.body and "tool_choice" not in first.body
        system = first.body["messages"][0]
        assert system["role"] == "system" and "<tools>" in system["content"] and '"name":"memory"' in system["content"]
        # The call went back as a tag, its result as a plain user message.
        sent = second.body["messages"]
        assert "tools" not in second.body and all(m["role"] != "tool" for m in sent)
        assert sent[-2]["role"] == "assistant" and "<tool_call>" in sent[-2]["content"]
        assert "tool_calls" not in sent[-2]
        assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith("[Tool result: memory]\n")

        # Stored as native tool calls: valid v11 rows any model can be given again.
        stored = db_messages(db_path, "s1")
        assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
        assert_consistent(stored)
        call = stored[1]["tool_calls"][0]
        assert call["type"] == "function" and call["function"]["name"] == "memory"
        assert json.loads(call["function"]["arguments"]) == MEMORY_ARGS
        assert stored[1]["content"] == "I will remember that."
        assert stored[2]["tool_call_id"] == call["id"] and stored[2]["tool_name"] == "memory"
        if streamed:
            # What was shown never held the call itself.
            shown = _shown_anywhere(listener)
            assert "bees on the roof." in listener.shown and FACT not in shown and "call" not in shown
            assert "```" not in shown

        # The switch is remembered: the next turn sends no tools field at all.
        fake_openai.reply("Anything else?")
        await rt.agent(request("thanks")).run_turn(request("thanks"))
        assert "tools" not in fake_openai.chat_requests[-1].body
        assert len([r for r in fake_openai.chat_requests if "tools" in r.body]) == 1


async def test_the_session_moves_to_a_native_model_with_valid_history(
    store: StateStore, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    fake_openai.reply(text_call("tag", "memory", MEMORY_ARGS))
    fake_openai.reply("Noted.")
    async with _client(fake_openai, tool_format="text") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        await rt.agent(request("remember the bees")).run_turn(request("remember the bees"))
    fake_openai.reply("Yes, bees.")
    async with _client(fake_openai, tool_format="native", model="gpt-4o") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        await rt.agent(request("what do I keep?")).run_turn(request("what do I keep?"))
    body = fake_openai.chat_requests[-1].body
    assert body["tools"]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assistant, tool = body["messages"][2], body["messages"][3]
    assert assistant["tool_calls"][0]["function"]["name"] == "memory"
    assert tool["tool_call_id"] == assistant["tool_calls"][0]["id"]


@pytest.mark.parametrize(
    ("written", "error"),
    [
        ('<tool_call>{"name": "memory", "arguments": {"action": "add",</tool_call>',
         "Error: the arguments for memory are not a JSON object"),
        ('<tool_call>{"name": "launch_rockets", "arguments": {"count": 3}}</tool_call>',
         "Error: there is no tool named 'launch_rockets'"),
        ('<tool_call>{"arguments": {"action": "add"}}</tool_call>',
         "Error: there is no tool named 'invalid_tool_call'"),
        ("<|tool_call>call:memory{action:<|\"|>add<|\"|>,target:<tool_call|>",
         "Error: the arguments for memory are not a JSON object"),
    ],
    ids=["broken-json", "not-offered", "no-name", "broken-gemma"],
)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_malformed_text_call_is_a_tool_error_for_the_model_never_raw_json_for_the_user(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path, written: str, error: str,
    streamed: bool,
) -> None:
    await new_session(store)
    fake_openai.reply(written)
    fake_openai.reply("Sorry, I could not do that.")
    listener = RecordingListener()
    turn = request("go")
    if streamed:
        turn = dataclasses.replace(turn, listener=listener)
    async with _client(fake_openai, tool_format="text") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(turn).run_turn(turn)
    assert result.text == "Sorry, I could not do that."
    stored = db_messages(db_path, "s1")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2]["content"].startswith(error)
    assert stored[1]["content"] is None  # the call is not kept as text: the answer holds no raw JSON
    result_msg = fake_openai.chat_requests[-1].body["messages"][-1]
    assert result_msg["role"] == "user" and error in result_msg["content"]
    assert not (tmp_path / "memories" / "USER.md").exists()
    if streamed:
        assert "{" not in _shown_anywhere(listener) and "tool_call" not in _shown_anywhere(listener)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_text_and_three_calls_run_all_three_in_order_and_keep_the_text(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path, streamed: bool
) -> None:
    await new_session(store)
    calls = "\n".join(text_call("tag", "echo", {"text": word}) for word in ("one", "two", "three"))
    fake_openai.reply(f"Three echoes coming.\n{calls}\nThat is all.")
    fake_openai.reply("Echoed one, two and three.")
    listener = RecordingListener()
    turn = request("echo three words")
    if streamed:
        turn = dataclasses.replace(turn, listener=listener)
    async with _client(fake_openai, tool_format="text") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(turn).run_turn(turn)
    assert result.text == "Echoed one, two and three."
    stored = db_messages(db_path, "s1")
    assert [m["role"] for m in stored] == ["user", "assistant", "tool", "tool", "tool", "assistant"]
    assert stored[1]["content"] == "Three echoes coming.\n\nThat is all."
    assert [json.loads(c["function"]["arguments"])["text"] for c in stored[1]["tool_calls"]] == ["one", "two", "three"]
    assert [m["content"] for m in stored[2:5]] == ["echoed one", "echoed two", "echoed three"]
    assert_consistent(stored)
    # The three results go back as one user message (templates that want roles to alternate).
    last = fake_openai.chat_requests[-1].body["messages"]
    assert [m["role"] for m in last[-2:]] == ["assistant", "user"]
    assert last[-1]["content"].count("[Tool result: echo]") == 3
    if streamed:
        assert listener.kinds.count("tool") == 3 and "<tool_call>" not in _shown_anywhere(listener)


async def test_auto_switches_when_a_native_request_is_answered_with_a_text_call(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    fake_openai.reply(text_call("gemma", "memory", MEMORY_ARGS))
    fake_openai.reply("Done.")
    async with _client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(request("bees")).run_turn(request("bees"))
        assert client.tool_formats.of("gemma3:4b") == "text" and client.tool_formats.of("other") == "auto"
    assert result.text == "Done." and FACT in (tmp_path / "memories" / "USER.md").read_text()
    first, second = fake_openai.chat_requests
    assert "tools" in first.body and "tools" not in second.body


async def test_auto_leaves_json_that_names_no_offered_tool_as_the_answer(
    store: StateStore, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    example = 'Like this:\n```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```'
    fake_openai.reply(example)
    async with _client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(request("show me a tool call")).run_turn(request("show me a tool call"))
        assert client.tool_formats.of("gemma3:4b") == "auto"
    assert result.text == example


async def test_native_mode_surfaces_the_refusal_instead_of_switching(
    store: StateStore, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    fake_openai.refuse_tools = "ollama"
    async with _client(fake_openai, tool_format="native") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        with pytest.raises(ModelError, match="does not support tools"):
            await rt.agent(request("hi")).run_turn(request("hi"))
        assert client.tool_formats.of("gemma3:4b") == "native"


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("opened", [True, False], ids=["think-block", "opened-in-prompt"])
async def test_think_blocks_are_stored_as_reasoning_and_never_shown_as_the_answer(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path, streamed: bool, opened: bool
) -> None:
    await new_session(store)
    thought = "The user greets me. A short greeting back is best."
    fake_openai.reply(f"{'<think>' if opened else ''}{thought}</think>\n\nHello there!")
    listener = RecordingListener()
    turn = request("hello")
    if streamed:
        turn = dataclasses.replace(turn, listener=listener)
    async with _client(fake_openai) as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(turn).run_turn(turn)
    assert result.text == "Hello there!" and result.reasoning == thought
    [row] = [m for m in _full_messages(db_path, "s1") if m["role"] == "assistant"]
    assert row["content"] == "Hello there!" and row["reasoning_content"] == thought
    if streamed:
        assert listener.shown == "Hello there!"
        if opened:  # held back from the start; a block opened in the prompt is taken back once it closes
            assert "greets" not in _shown_anywhere(listener)


async def test_provider_reasoning_is_kept_apart_and_returned_with_the_turn(
    store: StateStore, db_path: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    await new_session(store)
    fake_openai.reply("Four.", reasoning_content="Two plus two is four.")
    async with _client(fake_openai, tool_format="native") as client:
        rt = make_runtime(store, client, tmp_path, tools=sample_tools())
        result = await rt.agent(request("2+2?")).run_turn(request("2+2?"))
    assert result.text == "Four." and result.reasoning == "Two plus two is four."
    [row] = [m for m in _full_messages(db_path, "s1") if m["role"] == "assistant"]
    assert row["reasoning_content"] == "Two plus two is four."
