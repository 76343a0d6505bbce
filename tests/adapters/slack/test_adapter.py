"""The Slack adapter end to end: the real slack-bolt / slack-sdk inside the real daemon
(``Gateway.run`` from config.yaml + .env) against the wire-level ``FakeSlack``, with the
scripted model server. Every wait has a timeout; "nothing happened" is proven by ordering
(a later message in the same chat is answered first), never by sleeping.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters._split import join_chunks
from adapters.base import OutboundMessage
from adapters.settings import reveal
from adapters.slack import SlackAdapter
from core.llm import ModelClient
from gateway.config import ConfigError, load_config
from gateway.daemon.runner import Gateway
from gateway.routing.turns import AgentMaker
from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack, sign
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port, write_config

from ..conftest import daemon_config, serve_gateway

ROOT = Path(__file__).resolve().parents[3]
WAIT = 15.0
USER = "U0USER001"


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


@dataclass
class RunningSlack:
    gateway: Gateway
    home: Path
    fake: FakeSlack
    http: httpx.AsyncClient

    @property
    def adapter(self) -> SlackAdapter:
        assert self.gateway.services is not None
        adapter = self.gateway.services.adapters["slack"]
        assert isinstance(adapter, SlackAdapter)
        return adapter

    @property
    def db_path(self) -> Path:
        return self.home / "state.db"

    def session_keys(self) -> list[str]:
        return sorted(r[0] for r in rows(self.db_path, "SELECT session_key FROM gateway_session_index"))

    def state(self) -> str | None:
        st = self.gateway.adapter_states.get("slack")
        return st.state if st else None


@asynccontextmanager
async def run_slack_gateway(
    home: Path,
    fake: FakeSlack,
    model_url: str | None,
    *,
    mode: str = "socket",
    slack: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    config: dict[str, Any] | None = None,
    wait_for: tuple[str, ...] = ("connected",),
    agent_maker: Callable[[ModelClient], AgentMaker] | None = None,
) -> AsyncIterator[RunningSlack]:
    port = free_port()
    section = {"api_base_url": fake.api_base_url, "mode": mode, "ping_interval": 0.5, "thinking_placeholder": False,
               **(slack or {})}
    cfg = daemon_config(model_url, port, "slack", section, None, config)
    full_env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_ALLOWED_USERS": USER, **(env or {})}
    if mode == "http":
        fake.events_url = f"http://127.0.0.1:{port}/slack/events"
    async with serve_gateway(home, cfg, full_env, "slack", wait_for, agent_maker=agent_maker) as (gw, http):
        yield RunningSlack(gw, home, fake, http)


def ts_of(body: dict[str, Any]) -> str:
    return str(body["event"]["ts"])


def turns(gw: RunningSlack) -> list[str]:
    """What users said that reached a turn, in order (from state.db, the source of truth)."""
    return [r[0] for r in rows(gw.db_path, "SELECT content FROM messages WHERE role = 'user' ORDER BY id")]


# -- round trips -----------------------------------------------------------------------------


async def test_socket_mode_dm_round_trip(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                 slack={"thinking_placeholder": True, "thinking_delay": 0}) as gw:
        assert gw.adapter.health == "live" and gw.adapter.health_reason is None
        assert len(fake.open_sockets) == 1
        body = await fake.user_says("Hello **there**")
        ts = ts_of(body)
        [reply] = await fake.wait_reply("D0DM0001", None, timeout=WAIT)
        # The "thinking" placeholder was posted where the user wrote (the DM itself, not a thread on
        # the message) and the answer edited into it.
        assert reply["text"] == "echo: Hello *there*"
        placeholder = [m for m in fake.sent if m["method"] == "chat.postMessage"]
        assert len(placeholder) == 1 and "thinking" in placeholder[0]["text"]
        assert placeholder[0]["thread_id"] is None
        updates = [m for m in fake.sent if m["method"] == "chat.update"]
        assert [u["message_id"] for u in updates] == [placeholder[0]["message_id"]]
        # Bolt acked the envelope.
        assert fake.acks
    assert gw.session_keys() == ["agent:main:slack:dm:D0DM0001"]
    assert rows(gw.db_path, "SELECT role, content FROM messages ORDER BY id") == [
        ("user", "Hello **there**"),
        ("assistant", "echo: Hello **there**"),
    ]
    assert rows(gw.db_path, "SELECT delivery_key FROM gateway_inbound_seen") == [(f"D0DM0001:{ts}",)]


async def test_quick_answer_gets_no_placeholder_slow_one_does(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    fake_openai.reply("quick")
    # Far apart, so a loaded machine cannot blur them: an instant answer stays well under the delay,
    # and the slow one outlasts it by seconds.
    fake_openai.delay(4.0).reply("slow")
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                 slack={"thinking_placeholder": True, "thinking_delay": 1.5},
                                 config={"agent": {"auto_title": False}}):
        await fake.user_says("one")
        await fake.wait_reply("D0DM0001", None, text="quick", timeout=WAIT)
        await fake.user_says("two")
        await fake.wait_reply("D0DM0001", None, text="slow", timeout=WAIT)
        assert [(m["method"], m["text"]) for m in fake.sent] == [
            ("chat.postMessage", "quick"),
            ("chat.postMessage", "_…thinking_"),
            ("chat.update", "slow"),
        ]
        assert fake.sent[1]["thread_id"] is None  # a DM is answered where the user wrote


async def test_http_mode_round_trip(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode="http") as gw:
        assert not fake.sockets  # no Socket Mode in HTTP mode
        # url_verification handshake answered with the challenge.
        status = await fake.post_event({"type": "url_verification", "challenge": "abc123", "token": "x"})
        assert status == 200
        await fake.user_says("hi over http")
        [reply] = await fake.wait_reply("D0DM0001", None, timeout=WAIT)
        assert reply["text"] == "echo: hi over http"
        assert gw.adapter.health == "live"
    assert gw.session_keys() == ["agent:main:slack:dm:D0DM0001"]
    assert not fake.calls_to("apps.connections.open")


async def test_http_mode_bad_signatures_are_401_and_never_dispatched(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode="http") as gw:
        def body(text: str) -> dict[str, Any]:
            ts = fake.next_ts()
            return fake.event_body({"type": "message", "user": USER, "text": text, "ts": ts,
                                    "channel": "D0DM0001", "channel_type": "im"})

        assert await fake.post_event(body("wrong secret"), secret="not-the-secret") == 401
        assert await fake.post_event(body("stale"), ts=int(time.time()) - 6 * 60) == 401
        assert await fake.post_event(body("unsigned"), signed=False) == 401
        assert await fake.post_event(body("future"), ts=int(time.time()) + 6 * 60) == 401
        # Headers the SDK's verifier alone would take ("+12", "1_2") or crash on (a timestamp that is
        # no number, a non-ASCII signature), and a body that is not UTF-8, each correctly signed.
        assert fake.events_url is not None
        now = int(time.time())
        for stamp in (f"+{now}", f"{now // 1000}_{now % 1000:03d}", "soon", "١٢"):
            raw = json.dumps(body(f"stamp {stamp!r}")).encode()
            headers = sign(raw, SIGNING_SECRET, stamp) | {"X-Slack-Request-Timestamp": stamp.encode()}
            assert await post_raw(gw, fake.events_url, raw, headers) == 401
        raw = json.dumps(body("non-ascii signature")).encode()
        headers = sign(raw, SIGNING_SECRET) | {"X-Slack-Signature": "v0=é".encode()}
        assert await post_raw(gw, fake.events_url, raw, headers) == 401
        raw = json.dumps(body("latin-1 \xe9"), ensure_ascii=False).encode("latin-1")
        assert await post_raw(gw, fake.events_url, raw, sign(raw, SIGNING_SECRET)) == 401
        # A signed one after them is the only one answered.
        good = body("the real one")
        assert await fake.post_event(good) == 200
        [reply] = await fake.wait_reply("D0DM0001", None, timeout=WAIT)
        assert reply["text"] == "echo: the real one"
        assert len(fake.sent) == 1
    assert turns(gw) == ["the real one"]


async def post_raw(gw: RunningSlack, url: str, raw: bytes, headers: Mapping[str, str | bytes]) -> int:
    resp = await gw.http.post(url, content=raw, headers=dict(headers))
    return resp.status_code


def test_http_mode_without_signing_secret_refuses_to_start(tmp_path: Path) -> None:
    home = tmp_path / "h"
    write_config(home, {"platforms": {"slack": {"mode": "http"}}}, {"SLACK_BOT_TOKEN": BOT_TOKEN})
    with pytest.raises(ConfigError) as info:
        load_config(home, environ={})
    text = str(info.value)
    assert "SLACK_SIGNING_SECRET" in text and "api.slack.com/apps" in text and BOT_TOKEN not in text
    # The real command: exit 78 (configuration error; systemd does not restart it), the reason on stderr.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER", "SLACK_"))}
    env.update(HERMES_HOME=str(home), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "gateway.cli", "run"], env=env, capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert proc.returncode == 78
    assert "SLACK_SIGNING_SECRET" in proc.stderr and "Signing Secret" in proc.stderr
    assert BOT_TOKEN not in proc.stderr + proc.stdout


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"SLACK_BOT_TOKEN": "xoxp-user-token", "SLACK_APP_TOKEN": APP_TOKEN}, "SLACK_BOT_TOKEN"),
        ({"SLACK_BOT_TOKEN": BOT_TOKEN}, "SLACK_APP_TOKEN"),
        ({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": "xoxb-not-an-app-token"}, "SLACK_APP_TOKEN"),
        ({"SLACK_ENABLED": "true"}, "SLACK_BOT_TOKEN"),
    ],
)
def test_config_refuses_unusable_tokens(tmp_path: Path, env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ=env)
    assert needle in str(info.value)
    assert all(v not in str(info.value) for k, v in env.items() if k.endswith("TOKEN"))


def test_config_maps_env_and_yaml(tmp_path: Path) -> None:
    write_config(tmp_path, {"platforms": {"slack": {"free_response_channels": "C1, C2", "mode": "http"}}},
                 {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET})
    loaded = load_config(tmp_path, environ={})
    settings = loaded.settings.platforms.slack
    assert settings.mode == "http" and settings.free_response_channels == frozenset({"C1", "C2"})
    assert reveal(settings.bot_token) == BOT_TOKEN and reveal(settings.signing_secret) == SIGNING_SECRET
    assert BOT_TOKEN not in repr(settings) and SIGNING_SECRET not in repr(settings)
    assert not load_config(tmp_path / "none", environ={}).settings.platforms.slack.active


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_ack_does_not_wait_for_the_turn(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, mode: str
) -> None:
    fake = fake_slack
    fake_openai.hang()  # the model never answers this turn
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode=mode,
                                 config={"gateway": {"drain_timeout": 0}}) as gw:
        body = fake.event_body({"type": "message", "user": USER, "text": "slow one", "ts": fake.next_ts(),
                                "channel": "D0DM0001", "channel_type": "im"})
        if mode == "socket":
            envelope = await fake.send_envelope(body)
            await fake.wait_ack(envelope, timeout=WAIT)
        else:
            assert await fake.post_event(body) == 200
        # Acknowledged, and the turn is still running: the model call is in flight, nothing was sent.
        await fake.wait_for(lambda: len(fake_openai.chat_requests) == 1, WAIT, what="the model call")
        assert not fake.sent
        assert gw.gateway.services is not None and gw.gateway.services.lanes.running == 1


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_no_api_call_stands_before_an_ack(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, mode: str
) -> None:
    """Bolt is seeded with the start-up auth.test: it never calls auth.test itself (whose 429 would be waited
    out before the ack), and Socket Mode connects to the URL of the one apps.connections.open."""
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode=mode):
        assert len(fake.calls_to("auth.test")) == 1
        if mode == "socket":
            [opened] = fake.calls_to("apps.connections.open")
            assert [s.number for s in fake.sockets] == [1] and opened.response["url"].endswith("/socket/1")
        # What a lazy auth.test in Bolt would meet now: a long rate limit.
        fake.fail_next("auth.test", 429, headers={"Retry-After": "60"})
        dm = fake.event_body({"type": "message", "user": USER, "text": "first event", "ts": fake.next_ts(),
                              "channel": "D0DM0001", "channel_type": "im"})
        if mode == "socket":
            await fake.wait_ack(await fake.send_envelope(dm), timeout=WAIT)
        else:
            assert await fake.post_event(dm) == 200
        await fake.wait_reply("D0DM0001", None, text="echo: first event", timeout=WAIT)
        # The bot's own message (as Slack echoes it) is still recognised without auth.test: no turn.
        own = fake.event_body({"type": "message", "user": "U0BOT0001", "bot_id": "B0BOT0001", "text": "echo: x",
                               "ts": fake.next_ts(), "channel": "D0DM0001", "channel_type": "im"})
        if mode == "socket":
            await fake.wait_ack(await fake.send_envelope(own), timeout=WAIT)
        else:
            assert await fake.post_event(own) == 200
        command = await fake.slash_command("/status", chat="D0DM0001")
        if mode == "socket":
            await fake.wait_ack(command["envelope_id"], timeout=WAIT)
        else:
            assert command["status"] == 200
        await fake.wait_for(lambda: any("Session:" in m["text"] for m in fake.sent), WAIT, what="the /status answer")
        assert len(fake.calls_to("auth.test")) == 1  # the queued 429 was never met
        assert len(fake.calls_to("apps.connections.open")) == (1 if mode == "socket" else 0)
        assert turns_of(tmp_path / "h") == ["first event"]
        # Recorded calls carry no credentials.
        assert all("authorization" not in {k.lower() for k in c.headers} for c in fake.calls)


def turns_of(home: Path) -> list[str]:
    return [r[0] for r in rows(home / "state.db", "SELECT content FROM messages WHERE role = 'user' ORDER BY id")]


# -- channels and threads --------------------------------------------------------------------


async def test_channel_mention_is_answered_in_its_thread_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        # Not addressed: a channel message without a mention gets nothing.
        quiet = await fake.user_says("humans talking", chat="C0CHAN001")
        # A mention: Slack sends `message` and `app_mention` for the same ts -> one turn, one session.
        body = await fake.user_says("what is up?", chat="C0CHAN001", mention=True)
        ts = ts_of(body)
        [reply] = await fake.wait_reply("C0CHAN001", ts, timeout=WAIT)
        assert reply["text"] == "echo: what is up?"
        # Proof by ordering that the quiet message and the second event did nothing:
        later = await fake.user_says("later", chat="C0CHAN001", mention=True)
        await fake.wait_reply("C0CHAN001", ts_of(later), text="echo: later", timeout=WAIT)
        assert turns(gw) == ["what is up?", "later"]
        assert not fake.thread_replies("C0CHAN001", ts_of(quiet))
        assert {m["thread_id"] for m in fake.sent} == {ts, ts_of(later)}
    # Each top-level mention starts the thread of its answer, and is keyed as that thread.
    assert gw.session_keys() == sorted([
        f"agent:main:slack:group:C0CHAN001:{ts}",
        f"agent:main:slack:group:C0CHAN001:{ts_of(later)}",
    ])
    assert rows(gw.db_path, "SELECT COUNT(*) FROM sessions") == [(2,)]


def model_request_for(fake_openai: FakeOpenAI, text: str) -> list[dict[str, Any]]:
    """The messages of the (one) model request whose last user message is ``text``."""
    found = [r.body["messages"] for r in fake_openai.chat_requests
             if [m for m in r.body["messages"] if m.get("role") == "user"][-1].get("content") == text]
    assert len(found) == 1, found
    return list(found[0])


async def test_thread_follow_up_is_keyed_by_thread(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    """The top-level mention, the answer in its thread and every follow-up there are one conversation."""
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                 config={"agent": {"auto_title": False}}) as gw:
        body = await fake.user_says("remember the number 42", chat="C0CHAN001", mention=True)
        root = ts_of(body)
        await fake.wait_reply("C0CHAN001", root, timeout=WAIT)
        # A follow-up in the thread the bot answered in: no mention needed, and the first exchange is there.
        await fake.user_says("which number?", chat="C0CHAN001", thread=root)
        await fake.wait_reply("C0CHAN001", root, text="echo: which number?", timeout=WAIT)
        assert fake.sent[-1]["thread_id"] == root
        history = [(m["role"], m["content"]) for m in model_request_for(fake_openai, "which number?")]
        assert ("user", "remember the number 42") in history
        assert ("assistant", "echo: remember the number 42") in history
        # A reply in a thread the bot is not part of is not for it.
        other = await fake.user_says("side chat", chat="C0CHAN001")
        await fake.user_says("in a human thread", chat="C0CHAN001", thread=ts_of(other))
        # A mention inside the thread (two events again): one turn, the same session.
        await fake.user_says("last", chat="C0CHAN001", thread=root, mention=True)
        await fake.wait_reply("C0CHAN001", root, text="echo: last", timeout=WAIT)
        assert turns(gw) == ["remember the number 42", "which number?", "last"]
    assert gw.session_keys() == [f"agent:main:slack:group:C0CHAN001:{root}"]
    assert rows(gw.db_path, "SELECT COUNT(*) FROM sessions") == [(1,)]
    assert rows(gw.db_path, "SELECT COUNT(DISTINCT session_id) FROM messages") == [(1,)]


async def test_free_response_channel_answers_without_mention(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                 slack={"free_response_channels": ["C0FREE001"]}) as gw:
        body = await fake.user_says("anyone?", chat="C0FREE001")
        await fake.wait_reply("C0FREE001", ts_of(body), timeout=WAIT)
        # With a mention in a free channel both events are addressed: still one turn.
        both = await fake.user_says("you there", chat="C0FREE001", mention=True)
        await fake.wait_reply("C0FREE001", ts_of(both), text="echo: you there", timeout=WAIT)
        # A follow-up in an answered thread continues that thread's session.
        await fake.user_says("and more", chat="C0FREE001", thread=ts_of(body))
        await fake.wait_reply("C0FREE001", ts_of(body), text="echo: and more", timeout=WAIT)
        assert turns(gw) == ["anyone?", "you there", "and more"]
    assert gw.session_keys() == sorted([
        f"agent:main:slack:group:C0FREE001:{ts_of(body)}",
        f"agent:main:slack:group:C0FREE001:{ts_of(both)}",
    ])


# -- redelivery ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_redelivered_event_is_one_turn(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, mode: str
) -> None:
    fake = fake_slack
    home = tmp_path / "h"
    async with run_slack_gateway(home, fake, fake_openai.base_url, mode=mode) as gw:
        body = await fake.user_says("only once please")
        await fake.wait_reply("D0DM0001", None, timeout=WAIT)
        for retry in (1, 2, 3):
            result = await fake.redeliver(body, retry)
            if mode == "http":
                assert result == 200
            else:
                await fake.wait_ack(result, timeout=WAIT)
        await fake.user_says("marker")
        await fake.wait_reply("D0DM0001", None, text="echo: marker", timeout=WAIT)
    # "Minutes later": a new daemon (no memory of event ids) gets the same event again.
    async with run_slack_gateway(home, fake, fake_openai.base_url, mode=mode):
        await fake.redeliver(body, 4)
        # Same event under a fresh event_id (the app_mention twin, or a replay) is the same post too.
        again = dict(body, event_id=fake.next_event_id())
        await fake.redeliver(again, 1)
        await fake.user_says("after restart")
        await fake.wait_reply("D0DM0001", None, text="echo: after restart", timeout=WAIT)
    assert turns(gw) == ["only once please", "marker", "after restart"]
    assert [m["text"] for m in fake.thread_replies("D0DM0001", None)].count("echo: only once please") == 1


# -- Socket Mode liveness --------------------------------------------------------------------


async def test_silent_socket_reconnects_once_with_one_handler(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        adapter = gw.adapter
        fake.go_silent()
        await fake.wait_for(lambda: len(fake.sockets) == 2 and len(fake.open_sockets) == 1, WAIT,
                            what="one reconnect")
        await fake.wait_for(lambda: adapter.health == "live", WAIT, what="health live again")
        assert [h for _, h, _ in adapter.health_log] == ["live", "degraded", "live"]
        assert adapter.reconnects == 1
        await fake.user_says("after the reconnect")
        [reply] = await fake.wait_reply("D0DM0001", None, timeout=WAIT)
        assert reply["text"] == "echo: after the reconnect"
        # Still exactly one socket: the old one was closed, no second reconnect followed.
        await fake.user_says("marker")
        await fake.wait_reply("D0DM0001", None, text="echo: marker", timeout=WAIT)
        assert len(fake.sockets) == 2 and [s.number for s in fake.open_sockets] == [2]
        assert adapter.reconnects == 1
        assert turns(gw) == ["after the reconnect", "marker"]


async def test_disconnect_message_reconnects(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url):
        await fake.disconnect("refresh_requested")
        await fake.wait_for(lambda: len(fake.sockets) == 2 and len(fake.open_sockets) == 1, WAIT,
                            what="a fresh socket")
        await fake.user_says("on the new socket")
        await fake.wait_reply("D0DM0001", None, text="echo: on the new socket", timeout=WAIT)
        assert len(fake.open_sockets) == 1
        assert len(fake.calls_to("apps.connections.open")) == 2  # one per socket


async def test_bad_app_token_fails_clearly(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, wait_for=("failed",),
                                 env={"SLACK_APP_TOKEN": "xapp-1-revoked-token"}) as gw:
        st = gw.gateway.adapter_states["slack"]
        assert st.state == "failed" and st.last_error is not None
        assert "SLACK_APP_TOKEN" in st.last_error and "invalid_auth" in st.last_error
        assert "xapp-1-revoked-token" not in st.last_error
        assert gw.adapter.health == "failed" and "SLACK_APP_TOKEN" in (gw.adapter.health_reason or "")
        assert len(fake.calls_to("apps.connections.open")) == 1  # no endless retry
        assert not fake.sockets


async def test_bad_bot_token_fails_clearly(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, wait_for=("failed",),
                                 env={"SLACK_BOT_TOKEN": "xoxb-wrong"}) as gw:
        st = gw.gateway.adapter_states["slack"]
        assert st.state == "failed" and "SLACK_BOT_TOKEN" in (st.last_error or "")
        assert len(fake.calls_to("auth.test")) == 1


# -- authorization ---------------------------------------------------------------------------


async def test_unauthorized_user_gets_no_turn(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        await fake.user_says("let me in", chat="D0DM0666", user="U0STRANGER")
        await fake.user_says("me too", chat="C0CHAN001", user="U0STRANGER", mention=True)
        await fake.user_says("allowed one")
        await fake.wait_reply("D0DM0001", None, text="echo: allowed one", timeout=WAIT)
        assert turns(gw) == ["allowed one"]
        assert {m["chat_id"] for m in fake.sent} == {"D0DM0001"}
    assert gw.session_keys() == ["agent:main:slack:dm:D0DM0001"]


@pytest.mark.parametrize("mode", ["socket", "http"])
async def test_slash_commands_reach_the_router(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, mode: str
) -> None:
    """Slack never sends a message starting with "/": /sethome and friends come as slash commands."""
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode=mode) as gw:
        sent = await fake.slash_command("/sethome", chat="C0HOME001")
        if mode == "socket":
            await fake.wait_ack(sent["envelope_id"], timeout=WAIT)
        else:
            assert sent["status"] == 200
        [notice] = await fake.wait_sent(1, timeout=WAIT)
        assert notice["chat_id"] == "C0HOME001" and notice["thread_id"] is None
        assert "Home channel of slack set to" in notice["text"]
        # A stranger's command is refused like a stranger's message: no answer.
        await fake.slash_command("/sethome", chat="C0HOME002", user="U0STRANGER")
        await fake.slash_command("/help", text="", chat="D0DM0001")
        help_text = await fake.wait_sent(2, timeout=WAIT)
        assert help_text[-1]["chat_id"] == "D0DM0001"
        assert {m["chat_id"] for m in fake.sent} == {"C0HOME001", "D0DM0001"}
        assert turns(gw) == []


# -- output ----------------------------------------------------------------------------------


async def test_long_reply_is_split_losslessly_in_thread(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    words = " ".join(f"w{i}&x" for i in range(2500))
    fake_openai.reply(words)
    # The answer whole (streamed, it is in test_streaming_e2e.py).
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, slack={"streaming": False}) as gw:
        body = await fake.user_says("long please", chat="C0CHAN001", mention=True)
        ts = ts_of(body)
        chunks = gw.adapter.split(words)
        assert len(chunks) >= 5
        sent = await fake.wait_sent(len(chunks), timeout=WAIT)
        assert all(m["thread_id"] == ts for m in sent)
        assert all(len(m["text"]) <= 4000 for m in sent)
        restored = join_chunks([m["text"].replace("&amp;", "&") for m in sent])
        assert restored == words


async def test_rate_limit_honours_retry_after(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        fake.fail_next("chat.postMessage", 429, headers={"Retry-After": "1"})
        await fake.user_says("hi")
        [reply] = await fake.wait_reply("D0DM0001", None, timeout=WAIT)
        assert reply["text"] == "echo: hi"
        posts = fake.calls_to("chat.postMessage")
        assert [c.status for c in posts] == [429, 200]
        assert posts[1].time - posts[0].time >= 1.0  # the wait Slack asked for, not a timing threshold
        assert gw.state() == "connected"


async def test_create_thread_seeds_a_thread(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        thread = await gw.adapter.create_thread("C0HOME001", "Handoff: <the plan> & more")
        assert thread is not None
        [seed] = fake.sent
        assert seed["message_id"] == thread and seed["thread_id"] is None
        assert "Handoff: &lt;the plan&gt; &amp; more" in seed["text"]
        await gw.adapter.send(OutboundMessage("slack", "C0HOME001", "continuing here", thread_id=thread))
        assert fake.sent[-1]["thread_id"] == thread
        # A user's reply in that thread reaches the bot without a mention.
        body = await fake.user_says("thanks", chat="C0HOME001", thread=thread)
        await fake.wait_reply("C0HOME001", thread, text="echo: thanks", timeout=WAIT)
        assert turns(gw) == ["thanks"]
        assert ts_of(body)
        info = await gw.adapter.get_chat_info("C0HOME001")
        assert info.name == "chan-c0home001"


async def test_secrets_never_reach_state_db_or_logs(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, capfd: pytest.CaptureFixture[str]
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                 env={"SLACK_BOT_TOKEN": "xoxb-wrong-9999"}, wait_for=("failed",)):
        pass
    out, err = capfd.readouterr()
    for secret in ("xoxb-wrong-9999", APP_TOKEN, SIGNING_SECRET):
        assert secret not in out and secret not in err
        assert secret.encode() not in (tmp_path / "h" / "state.db").read_bytes()
