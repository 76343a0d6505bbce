"""/handoff from the HTTP API to a Slack home channel: the real daemon with slack-sdk against
``FakeSlack``. The seed message's ts is the thread; a follow-up there joins the session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.adapters.slack.test_adapter import WAIT, rows, run_slack_gateway
from tests.emulators.fake_slack import FakeSlack
from tests.fakes.openai_server import FakeOpenAI

CHANNEL = "C0CHAN001"


def bound(db: Path, key: str) -> str | None:
    found = rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
    return found[0][0] if found else None


async def test_handoff_to_a_slack_thread_and_continue_there(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        async def api(text: str) -> str:
            body: dict[str, Any] = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": "alice"}
            resp = await gw.http.post("/v1/chat/completions", json=body)
            assert resp.status_code == 200, resp.text
            return str(resp.json()["choices"][0]["message"]["content"])

        await fake.user_says("/sethome", chat=CHANNEL, mention=True)
        await fake.wait_for(lambda: rows(gw.db_path, "SELECT chat_id FROM gateway_home_channels"), WAIT,
                            what="the home channel row")
        await api("remember nine")
        sid = bound(gw.db_path, "agent:main:api-server:dm:alice")
        done = await api("/handoff slack")
        assert done.startswith("Handoff complete: handed off to slack.")
        (key,), = rows(gw.db_path, "SELECT target_key FROM gateway_handoffs WHERE state = 'completed'")
        prefix = f"agent:main:slack:group:{CHANNEL}:"
        assert key.startswith(prefix) and bound(gw.db_path, key) == sid
        thread_ts = key[len(prefix):]
        replies = await fake.wait_reply(CHANNEL, thread_ts, timeout=WAIT)
        assert any("was just handed off from api-server" in m["text"] for m in replies)
        await fake.user_says("which number?", chat=CHANNEL, thread=thread_ts)
        await fake.wait_reply(CHANNEL, thread_ts, text="echo: which number?", timeout=WAIT)
        contents = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id",
                                       sid)]
        assert contents[0] == "remember nine" and contents[-1] == "echo: which number?"
