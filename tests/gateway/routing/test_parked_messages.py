"""Parked messages (``gateway.routing.parking``): a message the gateway took from its platform is
kept in state.db until it is answered, so a stop's drain (here) or a crash (``kill -9``:
``tests/adapters/telegram/test_queued_crash.py``) cannot lose it; the next start answers it."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import structlog

from adapters.base import ChatType, Disposition, InboundMessage, SendKind
from adapters.media import Attachment, AttachmentKind
from gateway.routing.parking import from_payload, to_payload
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1,u2"}
#: a stop that cuts what runs at once (the drain waits no time)
CUT = {"gateway": {"drain_timeout": 0}}


def parked(db: Path) -> list[tuple[str, str]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return [(str(r[0]), from_payload(str(r[1])).text)
                for r in conn.execute("SELECT session_key, payload FROM gateway_parked ORDER BY id")]
    finally:
        conn.close()


def replies(chat: ChatAdapter, to: str) -> list[str]:
    return [m.text for m in chat.to(to) if m.kind is SendKind.REPLY]


async def test_what_a_stop_cut_off_is_answered_at_the_next_start_in_order_and_once(
        gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    hold = fake_openai.hold_when(lambda body: "slow one" in str(body["messages"][-1]))
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, config=CUT, chat=chat) as gw:
        assert await chat.say("slow one", user="u1") is Disposition.ACCEPTED
        await asyncio.wait_for(hold.arrived.wait(), 10)
        assert await chat.say("/new Plans", user="u1") is Disposition.ACCEPTED  # a command waits its turn too
        assert await chat.say("then this", user="u1") is Disposition.ACCEPTED
        assert await chat.say("other chat", user="u2") is Disposition.ACCEPTED
        await chat.wait_sent(1, chat="u2")
        assert [m.kind for m in chat.to("u1")] == [SendKind.ACK]  # "queued", and nothing answered yet
    # the stop cut the running turn and dropped what waited: all three are still parked, u2's is not
    assert [text for _, text in parked(gw.db_path)] == ["slow one", "/new Plans", "then this"]
    hold.release.set()

    again = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=again) as gw:
        assert await again.say("after the start", user="u1", message_id="m-after") is Disposition.ACCEPTED
        sent = await again.wait_sent(4, chat="u1", timeout=20)
    texts = [m.text for m in sent]
    assert texts[0] == "echo: slow one"  # its question was stored before the stop: answered from it, not asked twice
    assert "new session" in texts[1].lower() and "Plans" in texts[1]
    assert texts[2:] == ["echo: then this", "echo: after the start"]
    assert all(m.kind is not SendKind.ACK for m in sent)  # nobody is told "queued" twice
    assert parked(gw.db_path) == []
    conn = sqlite3.connect(f"file:{gw.db_path}?mode=ro", uri=True)
    try:
        asked = [r[0] for r in conn.execute("SELECT content FROM messages WHERE role = 'user' ORDER BY id")]
    finally:
        conn.close()
    assert asked == ["slow one", "other chat", "then this", "after the start"]


async def test_an_answered_message_leaves_nothing_parked(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat) as gw:
        assert await chat.say("hello", user="u1") is Disposition.ACCEPTED
        assert await chat.say("/status", user="u1") is Disposition.ANSWERED
        assert await chat.say("hello", user="intruder") is Disposition.REFUSED
        await chat.wait_sent(2, chat="u1")
        fake_openai.fail(500, {"error": {"message": "down"}})
        assert await chat.say("this fails", user="u2") is Disposition.ACCEPTED
        await chat.wait_sent(1, chat="u2")
        assert await chat.say("/stop", user="u1") is Disposition.ANSWERED
    # the failed turn's row goes beside its lane once its notice is out; the stop waits for that write
    assert parked(gw.db_path) == []
    assert [m.kind for m in chat.to("u2")] == [SendKind.NOTICE]


async def test_a_parked_row_that_cannot_be_read_is_dropped_and_the_start_goes_on(
        gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat) as gw:
        pass
    conn = sqlite3.connect(gw.db_path)
    with conn:
        conn.execute("INSERT INTO gateway_parked (session_key, platform, user_id, payload, parked_at) "
                     "VALUES ('k', 'testchat', 'u1', '{not json', 1.0)")
        conn.execute("INSERT INTO gateway_parked (session_key, platform, user_id, payload, parked_at) "
                     "VALUES ('k', 'testchat', 'u1', ?, 2.0)", (to_payload(InboundMessage(
                         "testchat", "u1", ChatType.DM, "u1", "kept across", message_id="77")),))
        # a platform this gateway does not serve (a terminal chat's gateway on the daemon's home): left
        conn.execute("INSERT INTO gateway_parked (session_key, platform, user_id, payload, parked_at) "
                     "VALUES ('t', 'telegram', '9', ?, 3.0)", (to_payload(InboundMessage(
                         "telegram", "9", ChatType.DM, "9", "for telegram", message_id="78")),))
    conn.close()
    again = ChatAdapter()
    with structlog.testing.capture_logs() as logs:
        async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=again) as gw:
            sent = await again.wait_sent(1, chat="u1")
    assert [m.text for m in sent] == ["echo: kept across"]
    assert parked(gw.db_path) == [("t", "for telegram")]
    assert [e["park_id"] for e in logs if e["event"] == "router.parked_unreadable"] == [1]


def test_a_payload_keeps_the_message_and_its_files() -> None:
    msg = InboundMessage(
        "telegram", "-100", ChatType.GROUP, "7", "see this", message_id="5", thread_id="3", user_name="Zoë",
        chat_name="Room", timestamp=12.5, reply_to="4", dedupe_id="d5", addressed=True, platform_retries=True,
        attachments=(Attachment(AttachmentKind.VOICE, "file-id", name="a.ogg", mime="audio/ogg", size=10,
                                duration=1.5, unique_id="u1"),
                     Attachment(AttachmentKind.IMAGE, "", data=b"\x89PNG\x00\xff")),
    )
    assert from_payload(to_payload(msg)) == msg
    # a row handed between nodes by an older release: no files, no platform_retries
    old = ('{"chat_type": "dm", "platform": "slack", "chat_id": "C1", "user_id": "U1", "text": "hi", '
           '"message_id": "1", "thread_id": null, "user_name": null, "chat_name": null, "timestamp": 1.0, '
           '"reply_to": null, "dedupe_id": null, "redeliverable": true, "pre_authorized": false, "addressed": true}')
    assert from_payload(old) == InboundMessage("slack", "C1", ChatType.DM, "U1", "hi", message_id="1", timestamp=1.0)
