"""Relaying through the ledger (several nodes): a node whose adapter is in standby leaves what it
sends for the node connected to the platform, which sends it as it would have, unprefixed. Two
``Delivery`` objects over one store stand for the two nodes; the cluster wiring and PostgreSQL
are tested in tests/gateway/cluster and tests/adapters/telegram/test_cluster_relay.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from adapters.base import OutboundMessage, SendKind
from gateway.routing.delivery import Delivery, record_reply
from storage import StateStore
from tests.gateway._chat_adapter import ChatAdapter


async def _rows(store: Any) -> list[tuple[Any, ...]]:
    rows = await store.read(lambda c: c.execute("SELECT text, status, error FROM gateway_outbound ORDER BY id").fetchall())
    return [tuple(r) for r in rows]


async def test_a_standby_node_relays_every_kind_and_the_connected_node_sends_them_unprefixed(tmp_path: Path) -> None:
    standby, connected = ChatAdapter(), ChatAdapter()
    connected.ready.set()
    async with StateStore(tmp_path / "state.db") as store:
        here = Delivery(store, {"testchat": standby})
        here.relays = lambda platform: platform == "testchat"
        there = Delivery(store, {"testchat": connected})
        assert here.relaying("testchat") and not there.relaying("testchat")

        answer = OutboundMessage("testchat", "c1", "the answer", None, "m1")
        row = await store.write(lambda c: record_reply(c, answer, "key", "s1"))  # written with the answer
        assert await here.send(answer, session_key="key", session_id="s1", ledger_id=row)
        assert await here.send(OutboundMessage("testchat", "c1", "a notice", kind=SendKind.NOTICE))
        # no wait for a connection this node will never have (READY_WAIT is a minute)
        later = here.send_when_ready(OutboundMessage("testchat", "c2", "a scheduled answer"), ready_wait=3600)
        assert await asyncio.wait_for(later, 30)
        assert standby.sent == []
        assert await _rows(store) == [("the answer", "relay", None), ("a notice", "relay", None),
                                      ("a scheduled answer", "relay", None)]
        assert await here.recover("testchat", 3600) == 0  # a crash's recovery leaves them alone

        assert await here.send_relayed("testchat") == 0  # not connected here: they wait
        assert await there.send_relayed("testchat", batch=2) == 3
        assert [(m.chat_id, m.text, m.reply_to) for m in connected.sent] == [
            ("c1", "the answer", "m1"), ("c1", "a notice", None), ("c2", "a scheduled answer", None)]
        assert [r[1] for r in await _rows(store)] == ["sent"] * 3
        assert await there.send_relayed("testchat") == 0  # each once


async def test_a_relayed_message_the_platform_refuses_is_marked_failed(tmp_path: Path) -> None:
    standby, connected = ChatAdapter(), ChatAdapter()
    connected.ready.set()
    connected.fail_sends = 1
    async with StateStore(tmp_path / "state.db") as store:
        here = Delivery(store, {"testchat": standby})
        here.relays = lambda platform: True
        there = Delivery(store, {"testchat": connected})
        for text in ("refused", "taken"):
            assert await here.send(OutboundMessage("testchat", "c1", text))
        assert await there.send_relayed("testchat") == 1
        assert [m.text for m in connected.sent] == ["taken"]
        assert await _rows(store) == [("refused", "failed", "ConnectionError"), ("taken", "sent", None)]


class _StuckChat(ChatAdapter):
    """Sends hang from the second one on (until the test lets them go)."""

    def __init__(self) -> None:
        super().__init__()
        self.hanging = asyncio.Event()
        self.go = asyncio.Event()

    async def send(self, message: OutboundMessage) -> Any:
        if self.sent:
            self.hanging.set()
            await self.go.wait()
        return await super().send(message)


async def test_a_role_lost_mid_send_leaves_the_rows_not_begun_for_the_next_holder(tmp_path: Path) -> None:
    standby, connected = ChatAdapter(), _StuckChat()
    connected.ready.set()
    async with StateStore(tmp_path / "state.db") as store:
        here = Delivery(store, {"testchat": standby})
        here.relays = lambda platform: True
        there = Delivery(store, {"testchat": connected})
        for text in ("one", "two", "three"):
            assert await here.send(OutboundMessage("testchat", "c1", text))
        sending = asyncio.create_task(there.send_relayed("testchat"))
        await asyncio.wait_for(connected.hanging.wait(), 30)
        sending.cancel()  # the role is lost while "two" is being sent
        await asyncio.gather(sending, return_exceptions=True)
        assert [r[:2] for r in await _rows(store)] == [("one", "sent"), ("two", "expired"), ("three", "relay")]
        connected.go.set()
        assert await there.send_relayed("testchat") == 1
        assert [m.text for m in connected.sent] == ["one", "three"]


async def test_without_the_hook_nothing_is_relayed(tmp_path: Path) -> None:
    chat = ChatAdapter()
    chat.ready.set()
    async with StateStore(tmp_path / "state.db") as store:
        delivery = Delivery(store, {"testchat": chat})
        assert not delivery.relaying("testchat")
        assert await delivery.send(OutboundMessage("testchat", "c1", "direct"))
        assert [m.text for m in chat.sent] == ["direct"]
        await delivery.aclose()
        assert [r[1] for r in await _rows(store)] == ["sent"]


class _StreamingChat(ChatAdapter):
    """A chat adapter that would stream: each ``open_stream`` is noted (a relaying node must not ask)."""

    def __init__(self) -> None:
        super().__init__()
        self.streams_opened = 0

    def open_stream(self, target: OutboundMessage) -> None:
        self.streams_opened += 1


async def test_a_turn_on_a_relaying_node_neither_streams_nor_types_and_its_answer_is_relayed(
    tmp_path: Path, fake_openai: Any
) -> None:
    from tests.gateway.conftest import run_gateway

    chat = _StreamingChat()
    async with run_gateway(tmp_path / "h", fake_openai.base_url, chat=chat, env={"TESTCHAT_ALLOWED_USERS": "u1"},
                           config={"gateway": {"typing_delay": 0}}) as gw:
        assert gw.gateway.runtime is not None
        delivery = gw.gateway.runtime.services.delivery
        fake_openai.delay(0.2)  # the turns take a while: long enough for "typing…" to show
        await chat.say("first")  # not relaying: it opens its stream and shows it is typing
        await chat.wait_sent(1)
        assert chat.streams_opened == 1 and chat.typing
        chat.typing.clear()
        delivery.relays = lambda platform: platform == "testchat"
        await chat.say("second")
        store = gw.gateway.runtime.services.store

        async def relayed() -> bool:
            return [r[1] for r in await _rows(store)][-1:] == ["relay"]

        for _ in range(1000):
            if await relayed():
                break
            await asyncio.sleep(0.01)
        assert await relayed()
        assert chat.streams_opened == 1 and chat.typing == []
        assert [m.text for m in chat.sent] == ["echo: first"]
        delivery.relays = None  # this node holds the platform now
        assert await delivery.send_relayed("testchat") == 1
        assert [m.text for m in chat.sent] == ["echo: first", "echo: second"]
