"""A recovery sends what an earlier process left in the ledger, never a row of this process:
while one of those is pending its sender is at work (a scheduled run at start-up, a turn while
its adapter reconnects), and a recovery would send it a second time."""

from __future__ import annotations

import time
from pathlib import Path

from adapters.base import OutboundMessage
from gateway.routing.delivery import RECOVERED_PREFIX, Delivery, record_reply
from storage import StateStore
from tests.gateway._chat_adapter import ChatAdapter


async def test_recovery_takes_only_rows_written_before_this_process(tmp_path: Path) -> None:
    chat = ChatAdapter()
    async with StateStore(tmp_path / "state.db") as store:
        left = OutboundMessage("testchat", "u1", "left by a crash")
        await store.write(lambda c: record_reply(c, left, "key", None))
        time.sleep(0.01)  # the clock moves between the two rows
        delivery = Delivery(store, {"testchat": chat})
        mine = OutboundMessage("testchat", "u1", "being sent right now")
        mine_id = await store.write(lambda c: record_reply(c, mine, "key", None))
        assert await delivery.recover("testchat", 3600) == 1
        assert [m.text for m in chat.sent] == [RECOVERED_PREFIX + "left by a crash"]
        status = await store.read(lambda c: c.execute("SELECT status FROM gateway_outbound WHERE id = ?",
                                                       (mine_id,)).fetchone()[0])
        assert status == "pending"  # its own sender marks it
