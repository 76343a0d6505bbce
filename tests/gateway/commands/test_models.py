"""/model and /usage through the real daemon, a chat adapter without menus, and the scripted model
server (which serves a list of models and refuses others as OpenAI does)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import Running, run_gateway

ENV = {"TESTCHAT_ALLOWED_USERS": "u1,u2"}
MODELS = {"allowed": [
    "fake-model",
    {"name": "big-model", "label": "Big", "prices": {"prompt": 2.0, "completion": 8.0, "cached": 0.5}},
    {"name": "gone-model", "label": "Gone"},
]}


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def talk(run: Running, text: str, user: str = "u1") -> str:
    before = len(run.chat.to(user))
    await run.chat.say(text, user=user)
    sent = await run.chat.wait_sent(before + 1, chat=user)
    return sent[before].text


def models_sent(fake: FakeOpenAI) -> list[str]:
    return [r.body["model"] for r in fake.chat_requests]


async def test_switch_reaches_the_server_and_new_clears_it(gateway_home: Path) -> None:
    async with FakeOpenAI(served=["fake-model", "big-model"]) as fake, \
            run_gateway(gateway_home, fake.base_url, config={"models": MODELS}, env=ENV, chat=ChatAdapter()) as run:
        shown = await talk(run, "/model")
        assert "Model: fake-model (model.default in config.yaml)" in shown
        assert "▸ fake-model" in shown and "• big-model — Big ($2 prompt, $8 completion, $0.5 cached" in shown
        assert await talk(run, "one") == "echo: one"
        switched = await talk(run, "/model big-model")
        assert switched.startswith("🔀 This session now uses Big (was fake-model)")
        assert await talk(run, "two") == "echo: two"
        assert "Model: big-model" in await talk(run, "/status")
        assert "already uses big-model" in await talk(run, "/model Big")  # a label names it too
        assert models_sent(fake) == ["fake-model", "big-model"]
        # Another person's chat is not switched.
        assert await talk(run, "hi", user="u2") == "echo: hi"
        assert models_sent(fake)[-1] == "fake-model"
        await talk(run, "/new")
        assert await talk(run, "three") == "echo: three"
        assert models_sent(fake)[-1] == "fake-model"


async def test_bad_names_get_did_you_mean_and_change_nothing(gateway_home: Path) -> None:
    async with FakeOpenAI() as fake, \
            run_gateway(gateway_home, fake.base_url, config={"models": MODELS}, env=ENV, chat=ChatAdapter()) as run:
        reply = await talk(run, "/model big-modle")
        assert "Unknown model 'big-modle'. Did you mean 'big-model'?" in reply
        far = await talk(run, "/model nothing-like-it")
        assert far.startswith("⚠️ Unknown model 'nothing-like-it'.\nAllowed models:")
        long = await talk(run, "/model " + "x" * 5000)
        assert long.startswith("⚠️ Unknown model 'xxx") and "…'." in long and len(long) < 1000
        assert (await talk(run, "/model --pick")).startswith("⌛ That model menu is no longer current")
        assert (await talk(run, "/model --pick abcd1234 0")).startswith("⌛")
        assert (await talk(run, "/model a b")).startswith("Usage: /model")
        assert (await talk(run, "/model --frobnicate x")).startswith("Usage: /model")
        await talk(run, "hello")
        assert models_sent(fake) == ["fake-model"]
        assert rows(run.db_path, "SELECT name FROM gateway_session_settings") == []


async def test_an_empty_allowed_list_offers_model_default_alone(gateway_home: Path) -> None:
    async with FakeOpenAI() as fake, run_gateway(gateway_home, fake.base_url, env=ENV, chat=ChatAdapter()) as run:
        shown = await talk(run, "/model")
        assert "▸ fake-model" in shown and "models.allowed in config.yaml is empty" in shown
        refused = await talk(run, "/model other")
        assert refused.startswith("⚠️ 'other' is not allowed: models.allowed in config.yaml is empty")
        assert "already uses fake-model" in await talk(run, "/model fake-model")


async def test_a_rejected_model_falls_back_and_the_setting_goes_back(gateway_home: Path) -> None:
    async with FakeOpenAI(served=["fake-model", "big-model"]) as fake, \
            run_gateway(gateway_home, fake.base_url, config={"models": MODELS}, env=ENV, chat=ChatAdapter()) as run:
        await talk(run, "/model big-model")
        await talk(run, "/model gone-model")
        answer = await talk(run, "still there?")
        assert answer.startswith("echo: still there?")
        assert "The model server does not serve 'gone-model'" in answer and "'big-model'" in answer
        assert models_sent(fake) == ["gone-model", "big-model"]
        assert "Model: big-model (chosen for this session" in await talk(run, "/model")
        await talk(run, "again")
        assert models_sent(fake)[-1] == "big-model"
        assert rows(run.db_path, "SELECT model FROM sessions") == [("big-model",)]
        # The question and the answer are each stored once.
        assert [r[0] for r in rows(run.db_path, "SELECT content FROM messages ORDER BY id")][:2] == [
            "still there?", "echo: still there?"]


async def test_global_is_for_owners_and_session_choice_wins(gateway_home: Path) -> None:
    config = {"models": MODELS, "auth": {"owners": ["testchat:u1"]}}
    async with FakeOpenAI() as fake, \
            run_gateway(gateway_home, fake.base_url, config=config, env=ENV, chat=ChatAdapter()) as run:
        refused = await talk(run, "/model --global big-model", user="u2")
        assert refused.startswith("⛔ Only an owner")
        assert rows(run.db_path, "SELECT name FROM gateway_settings") == []
        done = await talk(run, "/model --global big-model")
        assert done.startswith("🔀 The default model for everyone is now Big (was fake-model)")
        assert "Model: big-model (the gateway's default, set by an owner" in await talk(run, "/model", user="u2")
        await talk(run, "/model fake-model", user="u2")
        await talk(run, "from u2", user="u2")
        await talk(run, "from u1")
        assert models_sent(fake) == ["fake-model", "big-model"]


async def test_a_rejected_global_default_goes_back_too(gateway_home: Path) -> None:
    config = {"models": MODELS, "auth": {"owners": ["testchat:u1"]}}
    async with FakeOpenAI(served=["fake-model", "big-model"]) as fake, \
            run_gateway(gateway_home, fake.base_url, config=config, env=ENV, chat=ChatAdapter()) as run:
        await talk(run, "/model --global big-model")
        await talk(run, "/model --global gone-model")
        answer = await talk(run, "hi", user="u2")
        assert answer.startswith("echo: hi") and "does not serve 'gone-model'" in answer
        assert models_sent(fake) == ["gone-model", "big-model"]
        assert rows(run.db_path, "SELECT value FROM gateway_settings WHERE name = 'model.default'") == [("big-model",)]
        await talk(run, "hi again", user="u2")
        assert models_sent(fake)[-1] == "big-model"


async def test_usage_is_the_sum_of_what_the_server_reported(gateway_home: Path) -> None:
    async with FakeOpenAI() as fake, \
            run_gateway(gateway_home, fake.base_url, config={"models": MODELS}, env=ENV, chat=ChatAdapter()) as run:
        assert await talk(run, "/usage") == "No session yet: nothing used."
        fake.reply("a", usage={"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107,
                               "prompt_tokens_details": {"cached_tokens": 40}})
        await talk(run, "one")
        await talk(run, "/model big-model")
        fake.reply_tool_calls([{"name": "memory", "arguments": {"action": "read"}}],
                              usage={"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020,
                                     "prompt_tokens_details": {"cached_tokens": 600}})
        fake.reply("b", usage={"prompt_tokens": 1200, "completion_tokens": 30, "total_tokens": 1230})
        await talk(run, "two")
        report = await talk(run, "/usage")
        assert "Model calls: 3" in report
        assert "Prompt tokens: 2,300 (cached: 640)" in report and "Completion tokens: 57" in report
        # fake-model has no prices; big-model's two calls: (400*2 + 600*0.5 + 20*8 + 1200*2 + 30*8) / 1e6
        assert "Cost: $0.0039" in report
        sid = rows(run.db_path, "SELECT id FROM sessions")[0][0]
        assert rows(run.db_path, "SELECT api_call_count, input_tokens, output_tokens, cache_read_tokens, "
                                 "estimated_cost_usd FROM sessions WHERE id = ?", sid) == [
            (3, 2300, 57, 640, (400 * 2 + 600 * 0.5 + 20 * 8 + 1200 * 2 + 30 * 8) / 1e6)]
        # Each answer keeps its call's completion tokens (the v11 messages.token_count).
        counted = rows(run.db_path, "SELECT token_count FROM messages WHERE role = 'assistant' ORDER BY id")
        assert counted == [(7,), (20,), (30,)]


async def test_a_side_question_and_a_background_task_use_the_model_the_chat_chose(gateway_home: Path) -> None:
    async with FakeOpenAI(served=["fake-model", "big-model"]) as fake, \
            run_gateway(gateway_home, fake.base_url, config={"models": MODELS}, env=ENV, chat=ChatAdapter()) as run:
        assert await talk(run, "one") == "echo: one"
        assert (await talk(run, "/model big-model")).startswith("🔀")
        before = len(run.chat.to("u1"))
        await run.chat.say("/btw aside", user="u1")
        side = (await run.chat.wait_sent(before + 1, chat="u1"))[before].text
        assert side.startswith("💬 (by the way)")
        before = len(run.chat.to("u1"))
        await run.chat.say("/bg later", user="u1")
        sent = await run.chat.wait_sent(before + 2, chat="u1")  # the task id, then its answer
        assert any("echo: later" in m.text for m in sent[before:])
        assert models_sent(fake) == ["fake-model", "big-model", "big-model"]
        bg = rows(run.db_path, "SELECT model FROM sessions WHERE title LIKE 'bg %'")
        assert bg == [("big-model",)]
