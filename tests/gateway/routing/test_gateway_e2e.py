"""The whole path of a message through the real daemon start-up path:
adapter in, router, lanes, fresh agent, scripted model over HTTP, reply out,
rows in state.db."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from adapters.base import ChatType, Disposition, SendKind
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1,u2,u3,alice"}


def rows(db: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def test_api_server_round_trip(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        resp = await gw.ask("hello there", user="alice")
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["object"] == "chat.completion"
        assert body["choices"][0]["message"]["content"] == "echo: hello there"
        second = await gw.ask("and again", user="alice")
        assert second.json()["choices"][0]["message"]["content"] == "echo: and again"
        # The model saw the stored history, not what the client sent.
        sent = fake_openai.chat_requests[-1].body["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
        assert sent[1]["content"] == "hello there"
        models = await gw.http.get("/v1/models")
        assert models.status_code == 200
    sessions = rows(gw.db_path, "SELECT id, source, user_id, system_prompt, message_count FROM sessions")
    assert len(sessions) == 1
    sid, source, user_id, prompt, count = sessions[0]
    assert (source, user_id, count) == ("api-server", "alice", 4)
    assert prompt  # stored once, reused
    msgs = rows(gw.db_path, "SELECT role, content FROM messages WHERE session_id = ? ORDER BY id", sid)
    assert msgs == [
        ("user", "hello there"),
        ("assistant", "echo: hello there"),
        ("user", "and again"),
        ("assistant", "echo: and again"),
    ]
    key = rows(gw.db_path, "SELECT session_key, session_id FROM gateway_session_index")
    assert key == [("agent:main:api-server:dm:alice", sid)]
    assert rows(gw.db_path, "PRAGMA integrity_check") == [("ok",)]


async def test_system_prompt_is_built_once_and_reused(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        await gw.ask("one")
        await gw.ask("two")
    first, second = (r.body["messages"][0]["content"] for r in fake_openai.chat_requests[-2:])
    assert first == second
    stored = rows(gw.db_path, "SELECT system_prompt FROM sessions")[0][0]
    assert stored == first


async def test_api_bad_requests_get_clear_errors(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        bad_json = await gw.http.post("/v1/chat/completions", content=b"{not json")
        assert bad_json.status_code == 400 and "JSON" in bad_json.json()["error"]["message"]
        no_user_msg = await gw.http.post("/v1/chat/completions", json={"messages": [{"role": "system", "content": "x"}]})
        assert no_user_msg.status_code == 400
        bad_user = await gw.http.post(
            "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "user": 5}
        )
        assert bad_user.status_code == 400
        not_list = await gw.http.post("/v1/chat/completions", json=[1, 2])
        assert not_list.status_code == 400
        # The daemon is still fine.
        ok = await gw.ask("still alive?")
        assert ok.status_code == 200
    assert fake_openai.chat_requests[-1].body["messages"][-1]["content"] == "still alive?"


async def test_many_chats_concurrently_each_reply_to_its_chat(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chats, per_chat = 50, 5

    async def converse(n: int) -> list[str]:
        answers = []
        for i in range(per_chat):
            resp = await gw.ask(f"chat{n} message{i}", user=f"user{n}")
            assert resp.status_code == 200, resp.text
            answers.append(resp.json()["choices"][0]["message"]["content"])
        return answers

    async with run_gateway(gateway_home, fake_openai.base_url, config={"gateway": {"max_concurrent_turns": 16}}) as gw:
        results = await asyncio.gather(*(converse(n) for n in range(chats)))
    for n, answers in enumerate(results):
        assert answers == [f"echo: chat{n} message{i}" for i in range(per_chat)]
    for n in (0, 17, 49):
        sid = rows(gw.db_path, "SELECT session_id FROM gateway_session_index WHERE session_key = ?",
                   f"agent:main:api-server:dm:user{n}")[0][0]
        contents = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id", sid)]
        expected = []
        for i in range(per_chat):
            expected += [f"chat{n} message{i}", f"echo: chat{n} message{i}"]
        assert contents == expected
    assert rows(gw.db_path, "SELECT COUNT(*) FROM sessions") == [(chats,)]


async def test_busy_lane_queues_in_order_with_one_ack(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat):
        fake_openai.delay(1.0)  # the first turn is slow
        assert await chat.say("first", user="u1") is Disposition.ACCEPTED
        await asyncio.sleep(0.2)
        for i in range(5):
            assert await chat.say(f"queued {i}", user="u1") is Disposition.ACCEPTED
        sent = await chat.wait_sent(7, chat="u1", timeout=20)
    acks = [m for m in sent if m.kind is SendKind.ACK]
    replies = [m.text for m in sent if m.kind is SendKind.REPLY]
    assert len(acks) == 1 and "queued" in acks[0].text.lower()
    assert replies == ["echo: first"] + [f"echo: queued {i}" for i in range(5)]


async def test_other_chats_are_not_blocked_by_a_slow_turn(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat):
        fake_openai.delay(3.0)
        await chat.say("slow one", user="u1")
        await asyncio.sleep(0.2)
        await chat.say("quick one", user="u2")
        quick = await chat.wait_sent(1, chat="u2", timeout=10)
        assert quick[0].text == "echo: quick one"
        assert not [m for m in chat.to("u1") if m.kind is SendKind.REPLY]  # still running


async def test_unauthorized_users_get_nothing_and_are_logged(
    gateway_home: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env={"TESTCHAT_ALLOWED_USERS": "u1"}, chat=chat,
                           config={"logging": {"level": "info"}}):
        assert await chat.say("let me in", user="mallory") is Disposition.REFUSED
        assert await chat.say("/help", user="mallory") is Disposition.REFUSED
        assert await chat.say("me too", user="eve", chat="group1", chat_type=ChatType.GROUP) is Disposition.REFUSED
        await chat.say("hi", user="u1")
        await chat.wait_sent(1, chat="u1")
    assert chat.to("mallory") == [] and chat.to("group1") == []
    assert len(fake_openai.chat_requests) == 1
    out = capsys.readouterr().out
    assert "auth.refused" in out and "mallory" in out
    assert "let me in" not in out  # ids only, never content


async def test_no_allowlist_denies_everyone(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat):
        assert await chat.say("hello", user="u1") is Disposition.REFUSED
    assert chat.sent == [] and fake_openai.chat_requests == []


async def test_display_name_is_never_an_identity(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    # "name-of-u9" is u9's display name in the test adapter; allowlisting it must not admit u9.
    async with run_gateway(gateway_home, fake_openai.base_url, env={"TESTCHAT_ALLOWED_USERS": "name-of-u9"},
                           chat=chat):
        assert await chat.say("hello", user="u9") is Disposition.REFUSED


async def test_duplicate_delivery_gives_one_turn_even_after_restart(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat):
        assert await chat.say("once", user="u1", message_id="42") is Disposition.ACCEPTED
        await chat.wait_sent(1, chat="u1")
        assert await chat.say("once", user="u1", message_id="42") is Disposition.DUPLICATE
    chat2 = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat2):
        assert await chat2.say("once", user="u1", message_id="42") is Disposition.DUPLICATE
        assert await chat2.say("new", user="u1", message_id="43") is Disposition.ACCEPTED
        await chat2.wait_sent(1, chat="u1")
    assert len(fake_openai.chat_requests) == 2


async def test_stop_bypasses_the_queue_and_keeps_what_was_said(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat) as gw:
        fake_openai.delay(10.0)
        await chat.say("a long task", user="u1")
        await asyncio.sleep(0.3)
        await chat.say("next question", user="u1")
        await chat.say("/stop", user="u1")
        notices = await chat.wait_sent(2, chat="u1", timeout=10)
        assert any("Stopped" in m.text for m in notices)
        sent = await chat.wait_sent(3, chat="u1", timeout=20)
        assert sent[-1].text == "echo: next question"
    contents = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages ORDER BY id")]
    assert contents == ["a long task", "next question", "echo: next question"]


async def test_no_model_configured_answers_with_how_to(gateway_home: Path) -> None:
    async with run_gateway(gateway_home, None) as gw:
        resp = await gw.ask("hello?")
        assert resp.status_code == 503
        error = resp.json()["error"]
        assert (error["type"], error["code"]) == ("server_error", "model_not_configured")
        assert "model.base_url" in error["message"] and "HERMES_MODEL" in error["message"]
    # The user's words are kept even though no model answered.
    assert rows(gw.db_path, "SELECT role, content FROM messages") == [("user", "hello?")]


async def test_model_errors_become_clear_replies(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        fake_openai.fail(401, {"error": {"message": "bad key"}})
        resp = await gw.ask("hi")
        assert resp.status_code == 502  # the model refused our key: not the client's fault
        error = resp.json()["error"]
        assert error["code"] == "upstream_auth_error" and "api_key" in error["message"].lower()
        ok = await gw.ask("hi again")
        assert ok.json()["choices"][0]["message"]["content"] == "echo: hi again"


async def test_help_and_status_commands(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat):
        await chat.say("/help", user="u1")
        await chat.say("hello", user="u1")
        await chat.wait_sent(2, chat="u1")
        await chat.say("/status", user="u1")
        await chat.say("/nosuchcommand", user="u1")
        sent = await chat.wait_sent(4, chat="u1")
    assert "/status" in sent[0].text and "/help" in sent[0].text
    status = sent[2].text
    assert "Session: 2" in status and "Messages: 2" in status and "fake-model" in status
    assert "Unknown command /nosuchcommand" in sent[3].text
    assert len(fake_openai.chat_requests) == 1  # commands never reach the model


async def test_interrupted_reply_is_recovered_once_after_restart(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat) as gw:
        chat.fail_sends = 1  # the platform fails the first send: the reply stays in the ledger
        await chat.say("important", user="u1")
        for _ in range(200):
            if rows(gw.db_path, "SELECT status FROM gateway_outbound") == [("failed",)]:
                break
            await asyncio.sleep(0.02)
    # A crash between "recorded" and "sent" leaves the row pending; simulate that state.
    conn = sqlite3.connect(gateway_home / "state.db")
    conn.execute("UPDATE gateway_outbound SET status = 'pending'")
    conn.commit()
    conn.close()
    chat2 = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat2):
        sent = await chat2.wait_sent(1, chat="u1")
        assert "recovered" in sent[0].text and sent[0].text.endswith("echo: important")
    chat3 = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat3):
        await asyncio.sleep(0.3)
    assert chat3.sent == []  # recovered once, never again
    assert rows(gateway_home / "state.db", "SELECT status FROM gateway_outbound") == [("recovered",)]


async def test_api_requests_without_idempotency_key_leave_no_dedupe_or_ledger_rows(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        for i in range(3):
            assert (await gw.ask(f"plain {i}")).status_code == 200
        first = await gw.http.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "once only"}], "user": "alice"},
            headers={"Idempotency-Key": "k-1"},
        )
        again = await gw.http.post(
            "/v1/chat/completions",
            json={"messages": [{"role": "user", "content": "once only"}], "user": "alice"},
            headers={"Idempotency-Key": "k-1"},
        )
    # The retry is answered with the first answer, without a second turn.
    assert first.status_code == again.status_code == 200
    assert first.json()["choices"][0]["message"] == again.json()["choices"][0]["message"]
    assert rows(gw.db_path, "SELECT delivery_key FROM gateway_inbound_seen") == [("idem:alice:k-1",)]
    # A waiting HTTP client cannot be answered after a crash, so nothing is ledgered for it.
    assert rows(gw.db_path, "SELECT COUNT(*) FROM gateway_outbound") == [(0,)]
    assert len(fake_openai.chat_requests) == 4


async def test_token_usage_is_recorded_on_the_session(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        await gw.ask("count my tokens")
        await gw.ask("and these")
    (inp, out, calls), = rows(gw.db_path, "SELECT input_tokens, output_tokens, api_call_count FROM sessions")
    assert calls == 2 and inp > 0 and out > 0
    tokens = rows(gw.db_path, "SELECT token_count FROM messages WHERE role = 'assistant'")
    assert all(t[0] and t[0] > 0 for t in tokens)


async def test_reset_policy_gives_the_old_session_a_memory_turn_first(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    flushed: list[tuple[str, int]] = []

    async def flush(services: object, session_id: str) -> None:
        # The old session is complete when its turn runs (in the background, once it was reset).
        count = rows(gateway_home / "state.db", "SELECT COUNT(*) FROM messages WHERE session_id = ?", session_id)
        flushed.append((session_id, int(count[0][0])))

    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat, memory_flush=flush,
                           config={"session_reset": {"mode": "idle", "idle_minutes": 1}}) as gw:
        await chat.say("before the break", user="u1")
        await chat.wait_sent(1, chat="u1")
        (old,), = rows(gw.db_path, "SELECT id FROM sessions")
        # Two hours pass.
        conn = sqlite3.connect(gw.db_path)
        conn.execute("UPDATE messages SET timestamp = timestamp - 7200")
        conn.execute("UPDATE gateway_session_index SET updated_at = updated_at - 7200")
        conn.commit()
        conn.close()
        await chat.say("after the break", user="u1")
        await chat.wait_sent(2, chat="u1")
    assert flushed == [(old, 2)]
    sessions = rows(gw.db_path, "SELECT id, end_reason FROM sessions ORDER BY started_at")
    assert sessions[0] == (old, "session_reset:idle") and sessions[1][1] is None
    assert rows(gw.db_path, "SELECT content FROM messages WHERE session_id = ?", sessions[1][0])[0] == (
        "after the break",
    )


async def test_api_key_is_checked_when_configured(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url, env={"API_SERVER_KEY": "sk-local-test-key"}) as gw:
        body = {"messages": [{"role": "user", "content": "hi"}], "user": "alice"}
        missing = await gw.http.post("/v1/chat/completions", json=body)
        wrong = await gw.http.post("/v1/chat/completions", json=body, headers={"Authorization": "Bearer nope"})
        models = await gw.http.get("/v1/models")
        right = await gw.http.post(
            "/v1/chat/completions", json=body, headers={"Authorization": "Bearer sk-local-test-key"}
        )
    assert missing.status_code == wrong.status_code == models.status_code == 401
    assert "sk-local-test-key" not in missing.text + wrong.text
    assert right.status_code == 200 and right.json()["choices"][0]["message"]["content"] == "echo: hi"
    assert len(fake_openai.chat_requests) == 1
