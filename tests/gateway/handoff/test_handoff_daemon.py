"""/handoff inside the real daemon, to a test platform without threads: failures of the
summary turn, the pending timeout racing a claimed handoff, the source chat held while
the handoff runs, the destination given back on failure, and rows a dead process left.

``GatedChat`` is the test platform with a gate on its sends into the home chat: the
summary reaches the platform and waits there, so a test can act at exactly the moment
the handoff is claimed and mid-transfer (no sleeps, no timing)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

from adapters.base import ChatType, InboundMessage, OutboundMessage, SendKind, SendResult
from storage import StateStore, WriterSettings
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import Running, run_gateway
from tests.gateway.control.test_control import until

WAIT = 15.0
ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1,u2"}
ALICE = "agent:main:api-server:dm:alice"
ROOM_U1 = "agent:main:testchat:group:room:u1"  # the key u1's own messages in the room get
DM_U1 = "agent:main:testchat:dm:u1"


class GatedChat(ChatAdapter):
    """Replies into ``gated_chat`` stop at the platform until ``gate`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.gated_chat: str | None = None
        self.gate = asyncio.Event()
        self.at_gate = asyncio.Event()

    async def send(self, message: OutboundMessage) -> SendResult:
        if message.chat_id == self.gated_chat and message.kind is SendKind.REPLY:
            self.at_gate.set()
            await self.gate.wait()
        return await super().send(message)


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def bound(db: Path, key: str) -> str | None:
    found = rows(db, "SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
    return found[0][0] if found else None


def contents(db: Path, session_id: str | None) -> list[str]:
    return [r[0] for r in rows(db, "SELECT content FROM messages WHERE session_id = ? ORDER BY id", session_id)]


async def say(run: Running, text: str, user: str = "alice") -> str:
    resp = await run.ask(text, user=user)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


async def set_home(chat: ChatAdapter, *, chat_id: str = "room", chat_type: ChatType = ChatType.GROUP) -> None:
    before = len(chat.to(chat_id))
    await chat.say("/sethome", user="u1", chat=chat_id, chat_type=chat_type)
    await chat.wait_sent(before + 1, chat=chat_id)


async def test_a_failed_summary_turn_fails_the_handoff_and_a_retry_works(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        await set_home(chat)
        await say(run, "the plan")
        sid = bound(run.db_path, ALICE)
        fake_openai.fail(400, "context too long")
        failed = await say(run, "/handoff testchat")
        assert failed.startswith("Handoff failed: the agent could not write its summary in testchat")
        assert rows(run.db_path, "SELECT state FROM gateway_handoffs") == [("failed",)]
        # The room had no session for u1 before: after the failure it has none again, and no claim on it.
        assert bound(run.db_path, ROOM_U1) is None
        assert rows(run.db_path, "SELECT COUNT(*) FROM gateway_session_bindings WHERE session_key = ?",
                    ROOM_U1) == [(0,)]
        assert bound(run.db_path, ALICE) == sid
        chat.fail_sends = 1  # the next summary cannot be sent either
        failed = await say(run, "/handoff testchat")
        assert failed.startswith("Handoff failed: sending the summary to testchat failed (ConnectionError")
        done = await say(run, "/handoff testchat")
        assert done.startswith("Handoff complete")
        assert [r[0] for r in rows(run.db_path, "SELECT state FROM gateway_handoffs ORDER BY id")] == [
            "failed", "failed", "completed"
        ]
        assert bound(run.db_path, ROOM_U1) == sid


async def test_a_failed_handoff_gives_a_dm_home_its_own_session_back(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        await set_home(chat, chat_id="u1", chat_type=ChatType.DM)  # the home is u1's own DM
        await chat.say("my own notes", user="u1")
        await chat.wait_sent(2, chat="u1")
        mine = bound(run.db_path, DM_U1)
        await say(run, "alice's plan")
        theirs = bound(run.db_path, ALICE)
        assert mine and theirs and mine != theirs
        fake_openai.fail(400, "context too long")
        failed = await say(run, "/handoff testchat")
        assert failed.startswith("Handoff failed:")
        assert rows(run.db_path, "SELECT state FROM gateway_handoffs") == [("failed",)]
        # u1's DM points at u1's own session again, and gained no claim on alice's.
        assert bound(run.db_path, DM_U1) == mine
        assert rows(run.db_path, "SELECT session_id FROM gateway_session_bindings WHERE session_key = ?",
                    DM_U1) == [(mine,)]
        before = len(chat.to("u1"))
        await chat.say("where were we?", user="u1")
        sent = await chat.wait_sent(before + 1, chat="u1")
        assert sent[-1].text == "echo: where were we?"
        assert contents(run.db_path, mine)[-2:] == ["where were we?", "echo: where were we?"]
        assert "where were we?" not in contents(run.db_path, theirs)


async def test_the_source_chat_is_held_while_its_handoff_runs(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = GatedChat()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        await set_home(chat)
        await say(run, "the plan")
        sid = bound(run.db_path, ALICE)
        chat.gated_chat = "room"
        handoff = asyncio.create_task(say(run, "/handoff testchat"))
        await asyncio.wait_for(chat.at_gate.wait(), WAIT)  # claimed; the summary is being delivered
        for held in (await run.ask("a second thought"), await run.ask("/new")):
            # The chat is busy for a moment: over HTTP that is a 429 with a Retry-After.
            assert held.status_code == 429 and "Retry-After" in held.headers, held.text
            assert held.json()["error"]["code"] == "chat_busy"
            assert held.json()["error"]["message"].startswith("⏳ This session is being handed off to testchat")
        assert "already being handed off" in await say(run, "/handoff testchat")
        assert sid in await say(run, "/status")  # read-only commands still answer
        chat.gate.set()
        assert (await asyncio.wait_for(handoff, WAIT)).startswith("Handoff complete")
        # Nothing interleaved with the synthetic turn; the session did not end.
        history = contents(run.db_path, sid)
        assert history[:2] == ["the plan", "echo: the plan"]
        assert history[2].startswith("[This session") and history[3].startswith("echo: [This session")
        assert len(history) == 4 and "a second thought" not in " ".join(history)
        assert rows(run.db_path, "SELECT ended_at FROM sessions WHERE id = ?", sid) == [(None,)]
        # Released: the source chat starts afresh.
        assert await say(run, "a second thought") == "echo: a second thought"
        assert bound(run.db_path, ALICE) not in (None, sid)


async def test_messages_waiting_in_a_dm_home_still_run_on_its_own_session(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    """The destination key is rebound in its lane, right before the summary turn: what the
    home chat's owner had already queued is answered in the owner's own session."""
    chat = GatedChat()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        lanes = run.gateway.services.lanes  # type: ignore[union-attr]
        await set_home(chat, chat_id="u1", chat_type=ChatType.DM)
        await say(run, "alice's plan")
        theirs = bound(run.db_path, ALICE)
        chat.gated_chat = "u1"
        await chat.say("my first question", user="u1")
        await asyncio.wait_for(chat.at_gate.wait(), WAIT)  # u1's own turn is running
        mine = bound(run.db_path, DM_U1)
        await chat.say("my second question", user="u1")  # waits behind it
        handoff = asyncio.create_task(say(run, "/handoff testchat"))
        await until(lambda: lanes.waiting(DM_U1) == 2, "the summary turn waits behind u1's question")
        assert bound(run.db_path, DM_U1) == mine  # not rebound while others wait ahead
        chat.gate.set()
        assert (await asyncio.wait_for(handoff, WAIT)).startswith("Handoff complete")
        assert contents(run.db_path, mine)[-2:] == ["my second question", "echo: my second question"]
        assert "my second question" not in contents(run.db_path, theirs)
        assert bound(run.db_path, DM_U1) == theirs


async def test_a_timeout_racing_a_claimed_handoff_never_marks_it_failed(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = GatedChat()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        handoffs = run.gateway.runtime.handoffs  # type: ignore[union-attr]
        assert handoffs is not None
        await set_home(chat)
        await say(run, "the plan")
        chat.gated_chat = "room"
        handoff = asyncio.create_task(say(run, "/handoff testchat"))
        await asyncio.wait_for(chat.at_gate.wait(), WAIT)
        (hid, state), = rows(run.db_path, "SELECT id, state FROM gateway_handoffs")
        assert state == "claimed"
        # The pending timeout fires now, mid-transfer: it must change nothing.
        assert await handoffs.expire(hid) is False
        assert rows(run.db_path, "SELECT state, error FROM gateway_handoffs") == [("claimed", None)]
        chat.gate.set()
        done = await asyncio.wait_for(handoff, WAIT)
        assert done.startswith("Handoff complete")
        assert rows(run.db_path, "SELECT state, error FROM gateway_handoffs") == [("completed", None)]
        # ...and once completed, a late timeout changes nothing either.
        assert await handoffs.expire(hid) is False
        assert rows(run.db_path, "SELECT state FROM gateway_handoffs") == [("completed",)]


async def test_stopping_the_daemon_mid_handoff_fails_it_and_gives_the_destination_back(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = GatedChat()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW,
                           config={"gateway": {"drain_timeout": 0}}) as run:
        await set_home(chat)
        await say(run, "the plan")
        sid = bound(run.db_path, ALICE)
        chat.gated_chat = "room"
        handoff = asyncio.create_task(say(run, "/handoff testchat"))
        await asyncio.wait_for(chat.at_gate.wait(), WAIT)
        assert bound(run.db_path, ROOM_U1) == sid
        run.gateway.request_stop()  # the gate never opens: the stop cuts the summary turn off
        reply = await asyncio.wait_for(handoff, WAIT)
    assert reply.startswith("Handoff failed: the gateway stopped during the handoff.")
    (state, error), = rows(run.db_path, "SELECT state, error FROM gateway_handoffs")
    assert (state, error) == ("failed", "the gateway stopped during the handoff")
    assert bound(run.db_path, ROOM_U1) is None
    assert bound(run.db_path, ALICE) == sid


async def test_a_withdrawn_summary_turn_never_runs_and_the_home_chats_own_turn_is_untouched(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    """The synthetic turn waits in the home DM's lane behind the owner's own turn; the
    handoff gives up (its task is cancelled): the queued job is withdrawn, not left to
    deliver later, and the owner's running turn is not stopped."""
    chat = GatedChat()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        turns = run.gateway.runtime.turns  # type: ignore[union-attr]
        lanes = run.gateway.services.lanes  # type: ignore[union-attr]
        chat.gated_chat = "u1"
        await chat.say("my own question", user="u1")
        await asyncio.wait_for(chat.at_gate.wait(), WAIT)  # u1's turn runs, its reply is at the platform
        synthetic = InboundMessage("testchat", "u1", ChatType.DM, "u1", "[synthetic summary request]",
                                   redeliverable=False)
        summary = asyncio.create_task(turns.run_in_lane(synthetic, DM_U1, synthetic.text))
        await asyncio.sleep(0)  # let it queue
        assert lanes.waiting(DM_U1) == 1
        summary.cancel()
        chat.gate.set()
        await asyncio.wait_for(lanes.wait_idle(DM_U1), WAIT)
        assert summary.cancelled()
        assert [m.text for m in chat.to("u1")] == ["echo: my own question"]
        assert all("[synthetic" not in str(r.body) for r in fake_openai.chat_requests)
        assert contents(run.db_path, bound(run.db_path, DM_U1)) == ["my own question", "echo: my own question"]


async def test_cancelling_a_running_summary_turn_stops_only_that_turn(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    chat = GatedChat()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        turns = run.gateway.runtime.turns  # type: ignore[union-attr]
        lanes = run.gateway.services.lanes  # type: ignore[union-attr]
        chat.gated_chat = "u1"
        synthetic = InboundMessage("testchat", "u1", ChatType.DM, "u1", "[synthetic summary request]",
                                   redeliverable=False)
        summary = asyncio.create_task(turns.run_in_lane(synthetic, DM_U1, synthetic.text))
        await asyncio.wait_for(chat.at_gate.wait(), WAIT)  # the summary is being delivered
        await chat.say("queued behind it", user="u1")  # the home chat's own message waits behind
        assert lanes.waiting(DM_U1) == 1
        chat.gated_chat = None
        summary.cancel()
        await asyncio.wait_for(lanes.wait_idle(DM_U1), WAIT)
        assert summary.cancelled()
        texts = [m.text for m in chat.to("u1") if m.kind is SendKind.REPLY]
        assert texts == ["echo: queued behind it"]  # the owner's message still got its turn


async def test_rows_a_dead_daemon_left_live_are_failed_at_start(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with StateStore(gateway_home / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        now = time.time()
        await store.write(lambda c: c.executemany(
            "INSERT INTO gateway_handoffs (session_id, source_key, source_platform, target_platform, state, "
            "created_at, updated_at) VALUES (?, 'k', 'api-server', 'testchat', ?, ?, ?)",
            [("s1", "pending", now, now), ("s2", "claimed", now, now), ("s3", "completed", now, now)],
        ))
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW) as run:
        states = rows(run.db_path, "SELECT session_id, state, error FROM gateway_handoffs ORDER BY id")
        assert [s[:2] for s in states] == [("s1", "failed"), ("s2", "failed"), ("s3", "completed")]
        assert "restarted" in states[0][2]


class LeakyChat(ChatAdapter):
    """A platform whose send error quotes a secret (as a library error message might)."""

    secret = ""

    async def send(self, message: OutboundMessage) -> SendResult:
        if message.chat_id == "room" and message.kind is SendKind.REPLY:
            raise ConnectionError(f"upstream said: bad auth {self.secret}")
        return await super().send(message)


async def test_handoff_failure_reasons_are_redacted(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    chat = LeakyChat()
    chat.secret = "sk-handoff-secret-0123456789"
    async with run_gateway(gateway_home, fake_openai.base_url, chat=chat, env=ALLOW,
                           config={"model": {"api_key": chat.secret}}) as run:
        await set_home(chat)
        await say(run, "the plan")
        failed = await say(run, "/handoff testchat")
        assert failed.startswith("Handoff failed: sending the summary to testchat failed (ConnectionError")
        # The library's text is not shown at all (the log has it, redacted): only its class.
        assert failed.startswith("Handoff failed: sending the summary to testchat failed (ConnectionError).")
        assert chat.secret not in failed and "upstream said" not in failed
        (error,), = rows(run.db_path, "SELECT error FROM gateway_handoffs")
        assert chat.secret not in error
