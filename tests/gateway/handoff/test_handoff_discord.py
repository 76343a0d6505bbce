"""/handoff from the HTTP API to a Discord home channel: the real daemon with discord.py
against ``FakeDiscord``. The new thread's key must be the one Discord's own messages in
that thread produce (``thread:<channel>:<thread>``), so the next message joins the session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.adapters.discord.test_adapter import WAIT, in_channel, rows, run_discord_gateway
from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI


def bound(db: Path, key: str) -> str | None:
    found = rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
    return found[0][0] if found else None


async def test_handoff_to_a_discord_thread_and_continue_there(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    general = fake.general
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        async def api(text: str) -> str:
            body: dict[str, Any] = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": "alice"}
            resp = await gw.http.post("/v1/chat/completions", json=body)
            assert resp.status_code == 200, resp.text
            return str(resp.json()["choices"][0]["message"]["content"])

        await fake.user_says("/sethome", chat=general, mention=True)
        [ack] = await fake.wait_sent(1, timeout=WAIT, match=in_channel(general))
        assert "Home channel of discord set" in ack["text"]
        await api("remember seven")
        sid = bound(gw.db_path, "agent:main:api-server:dm:alice")
        await api("/title Seven")
        done = await api("/handoff discord")
        assert done.startswith("Handoff complete: handed off to discord.") and done.endswith("/resume Seven")
        [thread] = fake.threads
        assert thread["parent_id"] == general and thread["name"] == "Hermes — Seven"
        [summary] = await fake.wait_sent(1, timeout=WAIT, match=in_channel(thread["id"]))
        assert summary["text"].startswith('echo: [This session ("Seven") was just handed off')
        key = f"agent:main:discord:group:{general}:{thread['id']}"
        assert bound(gw.db_path, key) == sid
        await fake.wait_for(
            lambda: gw.adapter._client is not None and gw.adapter._client.get_channel(int(thread["id"])),
            WAIT, what="the thread in discord.py's cache",
        )
        await fake.user_says("which number?", thread=thread["id"])  # the bot's own thread: no mention needed
        sent = await fake.wait_sent(2, timeout=WAIT, match=in_channel(thread["id"]))
        assert sent[1]["text"] == "echo: which number?"
        contents = [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE session_id = ? ORDER BY id",
                                       sid)]
        assert contents[0] == "remember seven" and contents[-1] == "echo: which number?"
