"""The full agent through the real daemon: HTTP API in, FakeOpenAI behind, state.db on disk."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway

from ._agent_env import db_messages, db_rows


def _answer(response: object) -> str:
    body = response.json()  # type: ignore[attr-defined]
    return str(body["choices"][0]["message"]["content"])


async def test_tool_loop_through_the_daemon(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "hermes"
    fake_openai.reply_tool_calls(
        [{"id": "m1", "name": "memory", "arguments": {"action": "add", "target": "user",
                                                      "content": "Alice prefers short answers."}},
         {"id": "s1", "name": "skills_list", "arguments": {}}],
    )
    fake_openai.reply("Noted: short answers from now on.")
    async with run_gateway(home, fake_openai.base_url) as gw:
        response = await gw.ask("Please keep answers short.")
        assert response.status_code == 200
        assert _answer(response) == "Noted: short answers from now on."
    (sid,) = db_rows(gw.db_path, "SELECT session_id FROM gateway_session_index")[0]
    stored = db_messages(gw.db_path, sid)
    assert [(m["role"], m["tool_call_id"]) for m in stored] == [
        ("user", None), ("assistant", None), ("tool", "m1"), ("tool", "s1"), ("assistant", None)]
    assert "Alice prefers short answers." in (home / "memories" / "USER.md").read_text()
    first, second = fake_openai.chat_requests
    assert {t["function"]["name"] for t in first.body["tools"]} == {
        "memory", "session_search", "skills_categories", "skills_list", "skill_view", "skill_manage", "send_file",
        "cronjob", "read_file", "write_file", "patch", "search_files", "terminal", "web_fetch"}
    assert second.body["messages"][-1]["role"] == "tool"


async def test_toolsets_per_platform_from_config(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    config = {"agent": {"toolsets": {"api-server": {"disabled": ["skills"]}}}}
    async with run_gateway(tmp_path / "hermes", fake_openai.base_url, config=config) as gw:
        assert (await gw.ask("hi")).status_code == 200
    names = {t["function"]["name"] for t in fake_openai.chat_requests[0].body["tools"]}
    assert names == {"memory", "session_search", "send_file", "cronjob", "read_file", "write_file", "patch", "search_files",
                     "terminal", "web_fetch"}


async def test_compression_splits_and_the_chat_continues_in_the_new_session(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    config = {"model": {"context_length": 1024}, "agent": {"tail_tokens": 100}}
    async with run_gateway(tmp_path / "hermes", fake_openai.base_url, config=config) as gw:
        for i in range(3):
            assert (await gw.ask(f"message {i} " + "word " * 200)).status_code == 200
        (first_sid,) = db_rows(gw.db_path, "SELECT session_id FROM gateway_session_index")[0]
        assert (await gw.ask("and the fourth " + "word " * 200)).status_code == 200
        (second_sid,) = db_rows(gw.db_path, "SELECT session_id FROM gateway_session_index")[0]
        assert second_sid != first_sid
        assert (await gw.ask("short one")).status_code == 200
        (current,) = db_rows(gw.db_path, "SELECT session_id FROM gateway_session_index")[0]
    assert db_rows(gw.db_path, "SELECT end_reason FROM sessions WHERE id = ?", first_sid) == [("compression",)]
    assert db_rows(gw.db_path, "SELECT parent_session_id FROM sessions WHERE id = ?", second_sid) == [(first_sid,)]
    assert len(db_messages(gw.db_path, first_sid)) == 6  # the old transcript is kept whole
    second = [m["content"] for m in db_messages(gw.db_path, second_sid)]
    assert any(c.startswith("[Summary of the earlier part") for c in second)
    assert second[-2].startswith("and the fourth")
    # The chat carries on in the lineage (this tiny context window compresses again as it grows).
    assert [m["content"] for m in db_messages(gw.db_path, current)][-2:] == ["short one", "echo: short one"]
    chain, sid = [], current
    while sid is not None:
        chain.append(sid)
        sid = db_rows(gw.db_path, "SELECT parent_session_id FROM sessions WHERE id = ?", sid)[0][0]
    assert chain[-2:] == [second_sid, first_sid]


async def test_compress_command_by_hand(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    config = {"agent": {"tail_tokens": 50}}
    async with run_gateway(tmp_path / "hermes", fake_openai.base_url, config=config) as gw:
        for i in range(4):
            assert (await gw.ask(f"message {i} " + "word " * 50)).status_code == 200
        (before,) = db_rows(gw.db_path, "SELECT session_id FROM gateway_session_index")[0]
        reply = _answer(await gw.ask("/compress"))
        (after,) = db_rows(gw.db_path, "SELECT session_id FROM gateway_session_index")[0]
    assert reply.startswith("🗜️ Compressed") and after in reply and after != before
    assert db_rows(gw.db_path, "SELECT parent_session_id FROM sessions WHERE id = ?", after) == [(before,)]
