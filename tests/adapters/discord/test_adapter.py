"""The Discord adapter end to end: the real discord.py inside the real daemon (``Gateway.run`` from
config.yaml + .env) against the wire-level ``FakeDiscord``, with the scripted model server. Every wait
has a timeout; "nothing happened" is proven by ordering (a later message in the same channel is
answered first), never by sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters._split import join_chunks
from adapters.base import AdapterError, OutboundMessage
from adapters.discord import DiscordAdapter
from core.llm import ModelClient
from gateway.config import ConfigError, load_config
from gateway.daemon.runner import Gateway
from gateway.routing.turns import AgentMaker
from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port, write_config

from ..conftest import daemon_config, serve_gateway

ROOT = Path(__file__).resolve().parents[3]
WAIT = 15.0


@dataclass
class RunningDiscord:
    gateway: Gateway
    home: Path
    fake: FakeDiscord
    http: httpx.AsyncClient

    @property
    def adapter(self) -> DiscordAdapter:
        assert self.gateway.services is not None
        adapter = self.gateway.services.adapters["discord"]
        assert isinstance(adapter, DiscordAdapter)
        return adapter

    @property
    def db_path(self) -> Path:
        return self.home / "state.db"

    def state(self) -> str | None:
        st = self.gateway.adapter_states.get("discord")
        return st.state if st else None

    async def wait_state(self, *states: str, timeout: float = WAIT) -> str:
        async def reached() -> str:
            while (s := self.state()) not in states:
                await asyncio.sleep(0.02)
            assert s is not None
            return s

        return await asyncio.wait_for(reached(), timeout)

    async def wait_health(self, *healths: str, timeout: float = WAIT) -> str:
        async def reached() -> str:
            while self.adapter.health not in healths:
                await asyncio.sleep(0.01)
            return self.adapter.health

        return await asyncio.wait_for(reached(), timeout)


def discord_config(fake: FakeDiscord, **overrides: Any) -> dict[str, Any]:
    """``platforms.discord`` pointing at the fake, with quick test timings."""
    return {
        "base_url": fake.base_url,
        "gateway_url": fake.gateway_url,
        "guild_ready_timeout": 0.05,
        "identify_delay": 0,
        **overrides,
    }


@asynccontextmanager
async def run_discord_gateway(
    home: Path,
    fake: FakeDiscord,
    model_url: str | None,
    *,
    discord: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    config: dict[str, Any] | None = None,
    wait_for: tuple[str, ...] = ("connected",),
    agent_maker: Callable[[ModelClient], AgentMaker] | None = None,
) -> AsyncIterator[RunningDiscord]:
    # "Queued" acks would race the answers these tests wait for.
    cfg = daemon_config(model_url, free_port(), "discord", discord_config(fake, **(discord or {})),
                        {"gateway": {"busy_ack": False, "typing_delay": 0}}, config)
    full_env = {"DISCORD_BOT_TOKEN": fake.token, "DISCORD_ALLOWED_USERS": fake.user["id"], **(env or {})}
    async with serve_gateway(home, cfg, full_env, "discord", wait_for, agent_maker=agent_maker) as (gw, http):
        yield RunningDiscord(gw, home, fake, http)


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def session_keys(db: Path) -> list[str]:
    return sorted(r[0] for r in rows(db, "SELECT session_key FROM gateway_session_index"))


def in_channel(channel_id: str) -> Any:
    def match(m: dict[str, Any]) -> bool:
        return bool(m["chat_id"] == channel_id and m["method"] == "create_message")

    match.__name__ = f"in_channel_{channel_id}"
    return match


def untagged(text: str) -> str:
    """An echo without the "[speaker] " tag a shared (thread) session may put before each turn."""
    return re.sub(r"^echo: \[[^\]]*\] ", "echo: ", text)


def supervisor_tasks(adapter: str) -> list[asyncio.Task[Any]]:
    """The daemon's running supervisor task of ``adapter`` (``Gateway._supervise``, named ``adapter:<name>``)."""
    return [t for t in asyncio.all_tasks() if t.get_name() == f"adapter:{adapter}" and not t.done()]


def user_texts(db: Path) -> list[str]:
    """What reached the agent as user turns, in order."""
    return [r[0] for r in rows(db, "SELECT content FROM messages WHERE role = 'user' ORDER BY id")]


# -- round trips, addressing, keys -----------------------------------------------------------


async def test_dm_round_trip(tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        assert gw.adapter.health == "live" and gw.adapter.health_reason is None
        msg = await fake.user_says("Hello there, how are you?")
        [reply] = await fake.wait_sent(1, timeout=WAIT)
        assert reply["text"] == "echo: Hello there, how are you?"
        assert reply["chat_id"] == msg["channel_id"] and reply["reply_to"] == msg["id"]
        typing = fake.calls_to("typing")
        assert typing and typing[0].params["cid"] == msg["channel_id"]
        identify = fake.identifies[0]
        assert identify["intents"] & (1 << 15)  # message content asked for
    dm = msg["channel_id"]
    assert session_keys(gw.db_path) == [f"agent:main:discord:dm:{dm}"]
    assert rows(gw.db_path, "SELECT delivery_key FROM gateway_inbound_seen") == [(f"message:{msg['id']}",)]
    assert rows(gw.db_path, "SELECT source, user_id FROM sessions") == [("discord", fake.user["id"])]
    # The token appears nowhere in state.db.
    assert fake.token.encode() not in gw.db_path.read_bytes()


async def test_channel_answers_only_when_mentioned(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    general = fake.general
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        await fake.user_says("just chatting among humans", chat=general)
        asked = await fake.user_says("what is 2+2?", chat=general, mention=True)
        [reply] = await fake.wait_sent(1, timeout=WAIT, match=in_channel(general))
        # Same channel, dispatched in order: the unaddressed one was ignored, not queued.
        assert reply["text"] == "echo: what is 2+2?"  # the leading mention is not part of the question
        assert reply["reply_to"] == asked["id"]
        await fake.user_says("and a follow-up", chat=general, reply_to=reply["message_id"])  # reply to the bot
        sent = await fake.wait_sent(2, timeout=WAIT, match=in_channel(general))
        assert sent[1]["text"] == "echo: and a follow-up"
    assert user_texts(gw.db_path) == ["what is 2+2?", "and a follow-up"]
    uid = fake.user["id"]
    assert session_keys(gw.db_path) == [f"agent:main:discord:channel:{general}:{uid}"]


async def test_free_response_channel_and_require_mention_off(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    free = fake.add_channel("free")["id"]
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                   discord={"free_response_channels": [free]}):
        await fake.user_says("no mention needed here", chat=free)
        [reply] = await fake.wait_sent(1, timeout=WAIT, match=in_channel(free))
        assert reply["text"] == "echo: no mention needed here"
    fake.sent.clear()
    async with run_discord_gateway(tmp_path / "h2", fake, fake_openai.base_url,
                                   discord={"require_mention": False}):
        await fake.user_says("anyone?", chat=fake.general)
        [reply] = await fake.wait_sent(1, timeout=WAIT, match=in_channel(fake.general))
        assert reply["text"] == "echo: anyone?"


async def test_thread_messages_are_keyed_by_thread_and_shared(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    bob = fake.add_user("bob")
    general = fake.general
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                   env={"DISCORD_ALLOWED_USERS": f"{fake.user['id']},{bob['id']}"}) as gw:
        thread_id = await gw.adapter.create_thread(general, "Plans for the week")
        assert thread_id is not None
        [thread] = fake.threads
        assert thread["id"] == thread_id and thread["parent_id"] == general and thread["name"] == "Plans for the week"
        await fake.wait_for(lambda: gw.adapter._client is not None and gw.adapter._client.get_channel(int(thread_id)),
                            WAIT, what="the thread in discord.py's cache")
        # A thread the bot started needs no mention; both people share its session.
        await fake.user_says("first in thread", thread=thread_id)
        await fake.user_says("second, from bob", thread=thread_id, user=bob)
        sent = await fake.wait_sent(2, timeout=WAIT, match=in_channel(thread_id))
        assert [untagged(m["text"]) for m in sent] == ["echo: first in thread", "echo: second, from bob"]
        assert all(m["thread_id"] == thread_id for m in sent)
        # From an existing message: the thread takes the message's id.
        seed = await fake.user_says("seed message", chat=general)
        from_msg = await gw.adapter.create_thread(general, "x" * 150, from_message_id=seed["id"])
        assert from_msg == seed["id"]
        assert len(fake.channels[from_msg]["name"]) == 100
        info = await gw.adapter.get_chat_info(general)
        assert (info.chat_type, info.name) == ("channel", "general")
        assert await gw.adapter.create_thread(fake.dm_channel()["id"], "no threads in DMs") is None
    assert session_keys(gw.db_path) == [f"agent:main:discord:group:{general}:{thread_id}"]


async def test_auto_thread_opens_a_thread_from_the_mention(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    intruder = fake.add_user("mallory")
    general = fake.general
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, discord={"auto_thread": True}):
        await fake.user_says("let me in", chat=general, mention=True, user=intruder)  # refused: no thread
        asked = await fake.user_says("Plan a trip to Rome\nwith details", chat=general, mention=True)
        [reply] = await fake.wait_sent(1, timeout=WAIT)
        assert reply["chat_id"] == asked["id"] and reply["thread_id"] == asked["id"]
        [thread] = fake.threads
        assert thread["name"] == "Plan a trip to Rome" and thread["parent_id"] == general
        await fake.user_says("and the budget?", thread=thread["id"])  # no mention needed in its thread
        sent = await fake.wait_sent(2, timeout=WAIT)
        assert untagged(sent[1]["text"]) == "echo: and the budget?" and sent[1]["chat_id"] == thread["id"]
    assert len(fake.calls_to("start_thread_from_message")) == 1


async def test_unauthorized_user_gets_no_answer(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    stranger = fake.add_user("stranger")
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        await fake.user_says("let me in", user=stranger)
        await fake.user_says("let me in too", chat=fake.general, mention=True, user=stranger)
        await fake.user_says("I am allowed")
        [reply] = await fake.wait_sent(1, timeout=WAIT)
        assert reply["text"] == "echo: I am allowed"
    assert user_texts(gw.db_path) == ["I am allowed"]
    assert [m["text"] for m in fake.sent] == ["echo: I am allowed"]
    assert len(session_keys(gw.db_path)) == 1


# -- outbound -------------------------------------------------------------------------------


async def test_long_reply_split_with_429_on_the_second_chunk(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    code = "```python\n" + "\n".join(f"print({i})  # line {i}" for i in range(140)) + "\n```\n"
    long = ("Intro paragraph. " * 40 + "\n\n" + code + "\n" + "Closing words. " * 60).strip()
    assert len(long) > 4500
    fake_openai.reply(long)
    # The answer whole (a streamed one is in test_stream.py and test_streaming_e2e.py).
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, discord={"streaming": False}):
        # The first chunk goes through, the second meets a 429 once and is sent again after retry_after.
        fake.rate_limit_next("create_message", retry_after=0.05, skip=1)
        asked = await fake.user_says("write it all")
        sent = await fake.wait_sent(3, timeout=WAIT)
        await asyncio.sleep(0)  # let a stray duplicate (there must be none) show up in the same tick
    assert len(fake.sent) == len(sent)
    chunks = [m["text"] for m in sent]
    assert all(len(c) <= 2000 for c in chunks)
    assert join_chunks(chunks) == long  # lossless, in order, none twice
    for c in chunks:
        assert c.count("```") % 2 == 0  # every chunk's code fences are balanced
    assert sent[0]["reply_to"] == asked["id"] and all(m["reply_to"] is None for m in sent[1:])
    statuses = [c.status for c in fake.calls_to("create_message")]
    assert statuses.count(429) == 1


async def test_a_429_longer_than_we_may_wait_is_an_adapter_error(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    """discord.py raises ``RateLimited`` (not an ``HTTPException``) for it: it must not escape unwrapped."""
    fake = fake_discord
    dm = fake.dm_channel()["id"]
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        fake.rate_limit_next("create_message", retry_after=3600)  # longer than max_ratelimit_wait (300 s)
        with pytest.raises(AdapterError) as err:
            await gw.adapter.send(OutboundMessage("discord", dm, "too soon"))
        assert type(err.value) is AdapterError
        text = str(err.value)
        assert "rate limit" in text and "3600s" in text and "max_ratelimit_wait" in text
        assert fake.token not in text
        assert [c.status for c in fake.calls_to("create_message")] == [429]
        # The next message goes through.
        await fake.user_says("and now?")
        [reply] = await fake.wait_sent(1, timeout=WAIT)
        assert reply["text"] == "echo: and now?"


async def test_queued_ack_and_the_answer_both_refer_to_the_question(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    fake_openai.delay(1.0)  # the first turn is still running when the second message comes
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, config={"gateway": {"busy_ack": True}}):
        first = await fake.user_says("first question")
        await fake.wait_calls("typing", timeout=WAIT)
        second = await fake.user_says("second question")
        sent = await fake.wait_sent(3, timeout=WAIT)
    ack = next(m for m in sent if m["text"].startswith("⏳"))
    answers = {m["text"]: m for m in sent if m["text"].startswith("echo:")}
    assert ack["reply_to"] == second["id"]
    assert answers["echo: first question"]["reply_to"] == first["id"]
    assert answers["echo: second question"]["reply_to"] == second["id"]


# -- reconnects -----------------------------------------------------------------------------


async def test_resume_after_op7_with_a_message_in_the_gap_is_answered_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    """The gap message really arrives twice (replayed on RESUME and read back over REST), then a third
    time as a late duplicate gateway event: one turn."""
    fake = fake_discord
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        before = await fake.user_says("before the gap")
        await fake.wait_sent(1, timeout=WAIT)
        fake.hold_connections()
        await fake.reconnect()
        await gw.wait_health("degraded")
        gap = await fake.user_says("posted while the bot was away")  # kept in the session and in the history
        fake.release_connections()
        await fake.wait_for(lambda: fake.resumes, WAIT, what="a RESUME")
        sent = await fake.wait_sent(2, timeout=WAIT)
        assert sent[1]["text"] == "echo: posted while the bot was away" and sent[1]["reply_to"] == gap["id"]
        await gw.wait_health("live")
        await fake.wait_for(lambda: any(c.method == "logs_from" and c.status == 200 for c in fake.calls), WAIT,
                            what="the history read")
        # Path 1: Discord replayed it on RESUME. Path 2: the history read returned it.
        assert [f["d"]["id"] for f in fake.replayed if f["t"] == "MESSAGE_CREATE"] == [gap["id"]]
        [history] = fake.calls_to("logs_from")
        assert history.params["after"] == before["id"]  # from the last message seen before the gap
        assert [m["id"] for m in history.response if not m["author"].get("bot")] == [gap["id"]]
        # Path 3: the same event once more, after the read-back (a late duplicate).
        await fake.dispatch("MESSAGE_CREATE", gap)
        await fake.user_says("after the gap")
        sent = await fake.wait_sent(3, timeout=WAIT)
    assert [m["text"] for m in sent] == [
        "echo: before the gap", "echo: posted while the bot was away", "echo: after the gap"
    ]
    assert user_texts(gw.db_path) == ["before the gap", "posted while the bot was away", "after the gap"]
    assert len(fake.identifies) == 1 and len(fake.resumes) == 1


async def test_catch_up_reads_missed_messages_after_a_lost_session(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    """Op 9 (not resumable): Discord replays nothing; the REST catch-up finds the missed message."""
    fake = fake_discord
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        other = fake.add_channel("chatter")["id"]
        await fake.user_says("humans only", chat=other)  # never for the bot: not an active channel
        await fake.user_says("hello", chat=fake.general, mention=True)
        await fake.wait_sent(1, timeout=WAIT)
        fake.hold_connections()
        await fake.invalidate(resumable=False)
        await gw.wait_health("degraded")
        # Posted while no session exists: only the channel history has it.
        await fake.user_says("missed me?", chat=fake.general, mention=True, dispatch=False)
        fake.release_connections()
        sent = await fake.wait_sent(2, timeout=WAIT)
        assert sent[1]["text"] == "echo: missed me?"
        await gw.wait_health("live")
    assert len(fake.identifies) == 2
    assert user_texts(gw.db_path) == ["hello", "missed me?"]
    assert [c.params["cid"] for c in fake.calls_to("logs_from")] == [fake.general]


async def test_a_live_message_before_on_ready_does_not_hide_the_missed_ones(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    """Op 9 (not resumable), a message posted during the outage (only in the history), and a live message
    in the same channel right after the new READY, long before on_ready (guild_ready_timeout 1 s): the
    read-back starts from the newest message seen before the disconnect, not from the live one, and the
    live one is answered after the missed one."""
    fake = fake_discord
    general = fake.general
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                   discord={"guild_ready_timeout": 1}) as gw:
        hello = await fake.user_says("hello", chat=general, mention=True)
        await fake.wait_sent(1, timeout=WAIT, match=in_channel(general))
        fake.hold_connections()
        await fake.invalidate(resumable=False)
        await gw.wait_health("degraded")
        await fake.user_says("missed me?", chat=general, mention=True, dispatch=False)
        fake.after_ready(lambda: fake.user_says("live right after the new session", chat=general, mention=True))
        fake.release_connections()
        sent = await fake.wait_sent(3, timeout=WAIT, match=in_channel(general))
        await gw.wait_health("live")
    assert [m["text"] for m in sent] == ["echo: hello", "echo: missed me?", "echo: live right after the new session"]
    assert user_texts(gw.db_path) == ["hello", "missed me?", "live right after the new session"]
    [history] = fake.calls_to("logs_from")
    assert history.params["after"] == hello["id"]
    assert len(fake.identifies) == 2


async def test_invalid_session_resumable_and_a_dropped_socket(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        await fake.invalidate(resumable=True)
        await fake.wait_for(lambda: len(fake.resumes) == 1, WAIT, what="a RESUME after op 9 (true)")
        await fake.drop()  # no close frame: 1006
        await fake.wait_for(lambda: len(fake.resumes) == 2, WAIT, what="a RESUME after 1006")
        await fake.user_says("still there?")
        [reply] = await fake.wait_sent(1, timeout=WAIT)
        assert reply["text"] == "echo: still there?"
        assert gw.state() == "connected" and gw.adapter.health == "live"
    assert len(fake.identifies) == 1


async def test_4014_is_fatal_and_names_the_intent(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    fake.message_content_allowed = False
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, wait_for=("failed",)) as gw:
        st = gw.gateway.adapter_states["discord"]
        assert st.last_error is not None and "Message Content Intent" in st.last_error
        assert "Developer Portal" in st.last_error
        assert gw.adapter.health == "failed" and "Message Content Intent" in (gw.adapter.health_reason or "")
        # The other parts of the daemon still run: alive, but not ready.
        assert (await gw.http.get("/healthz")).status_code == 200
        assert (await gw.http.get("/readyz")).status_code == 503
        # The supervisor does not restart a fatal adapter: its task for Discord ends (while the one for
        # the HTTP API still runs) and discord.py's client is closed, so nothing can IDENTIFY again.
        await fake.wait_for(lambda: not supervisor_tasks("discord"), WAIT, what="the Discord supervisor to end")
        assert supervisor_tasks("api-server")
        assert gw.adapter._client is not None and gw.adapter._client.is_closed()
        assert len(fake.identifies) == 1 and st.restarts == 0 and st.state == "failed"
        assert fake.close_codes == [4014]


async def test_bad_token_is_fatal(tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, wait_for=("failed",),
                                   env={"DISCORD_BOT_TOKEN": "wrong.token.value"}) as gw:
        st = gw.gateway.adapter_states["discord"]
        assert st.last_error is not None and "DISCORD_BOT_TOKEN" in st.last_error
        assert "wrong.token.value" not in st.last_error
        assert not fake.identifies and len(fake.calls_to("get_user")) == 1


async def test_silent_gateway_trips_the_watchdog(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    fake.heartbeat_interval = 0.1
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                   discord={"heartbeat_timeout": 60}) as gw:
        await gw.wait_health("live")
        await fake.wait_for(lambda: any(acked for _, acked in fake.heartbeats), WAIT, what="an acked heartbeat")
        # The gateway still talks (RESUMED, events) but acknowledges no heartbeat, on any connection.
        fake.mute_acks(all_connections=True)
        await fake.wait_for(lambda: "heartbeat ACK" in (gw.adapter.health_reason or ""), WAIT,
                            what="health to name the missing ACKs")
        assert gw.adapter.health == "degraded"
        # The adapter drops the zombie connection itself (discord.py's check would wait 60 s) and resumes;
        # a RESUMED without ACKs is no recovery.
        resumes = len(fake.resumes)
        await fake.wait_for(lambda: len(fake.resumes) > resumes, WAIT, what="a RESUME after the watchdog")
        assert gw.adapter.forced_reconnects >= 1
        await fake.wait_for(lambda: "acknowledges no heartbeats" in (gw.adapter.health_reason or ""), WAIT,
                            what="health after a RESUME without ACKs")
        assert gw.adapter.health == "degraded"
        ready = await gw.http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["adapters"]["discord"]["state"] == "degraded"
        fake.unmute_acks()
        await gw.wait_health("live")
        # The watchdog reads discord.py's keep-alive state: no debug events (a task per gateway frame).
        assert gw.adapter._client is not None and not gw.adapter._client._enable_debug_events
        ready = await gw.http.get("/readyz")
        assert ready.json()["adapters"]["discord"]["state"] == "live"
        await fake.user_says("alive again?")
        [reply] = await fake.wait_sent(1, timeout=WAIT)
        assert reply["text"] == "echo: alive again?"


# -- configuration and the real process -----------------------------------------------------


def test_config_refuses_an_enabled_discord_without_a_token(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("platforms:\n  discord:\n    enabled: true\n")
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path, environ={})
    assert "DISCORD_BOT_TOKEN" in str(err.value) and "Developer Portal" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path, environ={"DISCORD_BOT_TOKEN": "abc", "DISCORD_GATEWAY_URL": "http://x"})
    assert "gateway_url" in str(err.value) and "abc" not in str(err.value)
    assert not load_config(tmp_path / "none", environ={}).settings.platforms.discord.active
    loaded = load_config(tmp_path / "env", environ={
        "DISCORD_BOT_TOKEN": "abc.def", "DISCORD_FREE_RESPONSE_CHANNELS": "1, 2", "DISCORD_AUTO_THREAD": "true",
        "DISCORD_REQUIRE_MENTION": "false"})
    dc = loaded.settings.platforms.discord
    assert dc.active and dc.free_response_channels == frozenset({"1", "2"}) and dc.auto_thread and not dc.require_mention


async def test_the_daemon_process_serves_discord_and_stops_cleanly(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    home = tmp_path / "h"
    port = free_port()
    write_config(home, {
        "model": {"base_url": fake_openai.base_url, "default": "fake-model", "max_retries": 0},
        "platforms": {"api_server": {"port": port},
                      "discord": discord_config(fake)},
        "logging": {"format": "json", "level": "info"},
    }, {"DISCORD_BOT_TOKEN": fake.token, "DISCORD_ALLOWED_USERS": fake.user["id"]})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER", "DISCORD_", "GATEWAY_"))}
    env.update(HERMES_HOME=str(home), PYTHONPATH=str(ROOT))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway.cli", "run", cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:

            async def healthy() -> bool:
                with contextlib.suppress(httpx.HTTPError):
                    return (await http.get("/readyz")).status_code == 200  # Discord connected and live
                return False

            loop = asyncio.get_running_loop()
            deadline = loop.time() + 60
            while not await healthy():
                assert loop.time() < deadline and proc.returncode is None, "the daemon did not become healthy"
                await asyncio.sleep(0.05)
        # /healthz is liveness only: wait for the gateway session, or the message has nowhere to go.
        await fake.wait_connected(timeout=60)
        msg = await fake.user_says("hello from a real process")
        [reply] = await fake.wait_sent(1, timeout=60)
        assert reply["text"] == "echo: hello from a real process" and reply["reply_to"] == msg["id"]
        proc.send_signal(signal.SIGTERM)
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    logs = (out + err).decode()
    assert "discord.connected" in logs
    assert fake.token not in logs
