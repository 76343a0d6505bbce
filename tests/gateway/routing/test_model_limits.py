"""What a chat sees of a hung model and of a huge answer, through the real daemon start-up path:
config.yaml's ``model.turn_timeout`` and ``model.max_response_bytes``, the router, a fresh agent,
FakeOpenAI over HTTP, and the rows in state.db."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1"}
CAP = 64 * 2**10


def rows(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def test_a_hung_model_gets_the_user_a_reply_when_the_turn_budget_runs_out(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    # Each attempt may take a minute and three retries are allowed: only the turn's budget
    # can bring the reply within the test's (generous) wait.
    model = {"turn_timeout": 0.5, "timeout": 60, "max_retries": 3}
    fake_openai.hang()  # a retry would get an echo, and the reply would say so
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, config={"model": model}, env=ALLOW, chat=chat):
        await chat.say("are you there?", user="u1")
        [reply] = await chat.wait_sent(1, chat="u1", timeout=30)
        assert len(fake_openai.chat_requests) == 1
        await chat.say("and now?", user="u1")
        later = await chat.wait_sent(2, chat="u1", timeout=30)
    assert reply.text.startswith("⚠️") and "time budget of 0.5s ran out" in reply.text
    assert "model.turn_timeout" in reply.text
    assert later[1].text == "echo: and now?"  # the chat is free again


async def test_an_answer_past_the_cap_is_cut_with_a_note_and_stored_once(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    # A small context window, so that the turn after the huge answer compresses the session.
    config = {"model": {"max_response_bytes": CAP, "context_length": 8192}}
    answer = "".join(f"paragraph {i}: lorem ipsum dolor sit amet. " for i in range(10_000))  # ~400 KB
    async with run_gateway(gateway_home, fake_openai.base_url, config=config) as gw:
        for i in range(3):
            assert (await gw.ask(f"warm-up {i}")).status_code == 200
        fake_openai.reply(answer)
        resp = await gw.ask("tell me everything")
        text = resp.json()["choices"][0]["message"]["content"]
        assert (await gw.ask("thanks")).json()["choices"][0]["message"]["content"] == "echo: thanks"
    assert text.endswith("[the model's answer was cut at 64 KB: model.max_response_bytes]")
    kept = text.rsplit("\n\n", 1)[0]
    assert answer.startswith(kept) and CAP // 2 < len(kept) < CAP
    sessions = rows(gw.db_path, "SELECT id FROM sessions ORDER BY started_at")
    assert len(sessions) == 2  # "thanks" continued in a compressed child session
    # The cut answer is stored once, whole, in the old session; the child keeps a pointer to it.
    assert rows(gw.db_path, "SELECT session_id, content FROM messages WHERE length(content) > ?", CAP // 2) == [
        (sessions[0][0], text)
    ]
    [(copy,)] = rows(gw.db_path, "SELECT content FROM messages WHERE session_id = ? AND content LIKE 'paragraph 0:%'",
                     sessions[1][0])
    assert str(copy).endswith(f"the whole message is in session {sessions[0][0]}.]")
