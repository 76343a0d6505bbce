"""The "back" notice of /restart in a real state.db: taken once, for its own platform only, and an
unreadable one is dropped (never a crash at start, never a second "back")."""

from __future__ import annotations

import json
import sqlite3

from adapters.base import OutboundMessage
from gateway.routing.restart import RESTART_NOTICE, RestartNotice, RestartSwitch, take_notice
from storage import StateStore, settings


def _recorder(seen: list[OutboundMessage]):  # type: ignore[no-untyped-def]
    def record(conn: sqlite3.Connection, out: OutboundMessage) -> int:
        seen.append(out)
        return len(seen)

    return record


async def test_the_notice_is_taken_once_by_its_platform(store: StateStore) -> None:
    stops: list[bool] = []
    switch = RestartSwitch(store, lambda: stops.append(True))
    notice = RestartNotice("telegram", "42", None, "7", 1000.0, "42")
    assert await switch.request(notice) is True
    assert await switch.request(notice) is False  # twice quickly: the first one stands
    switch.stop()
    assert stops == [True]
    seen: list[OutboundMessage] = []
    assert await store.write(lambda c: take_notice(c, "discord", _recorder(seen))) is None  # not its platform
    taken = await store.write(lambda c: take_notice(c, "telegram", _recorder(seen)))
    assert taken is not None and taken[1] == 1
    out = taken[0]
    assert (out.platform, out.chat_id, out.reply_to) == ("telegram", "42", "7")
    assert out.text.startswith("✅ Back: the gateway restarted")
    assert await store.write(lambda c: take_notice(c, "telegram", _recorder(seen))) is None  # once
    assert await store.read(lambda c: settings.get_global(c, RESTART_NOTICE)) is None


async def test_an_unreadable_notice_is_dropped(store: StateStore) -> None:
    for raw in ("not json", json.dumps({"platform": "telegram"}), json.dumps([1, 2])):
        await store.write(lambda c, raw=raw: settings.set_global(c, RESTART_NOTICE, raw, updated_by=None, now=1.0))
        seen: list[OutboundMessage] = []
        assert await store.write(lambda c, seen=seen: take_notice(c, "telegram", _recorder(seen))) is None
        assert seen == []
        assert await store.read(lambda c: settings.get_global(c, RESTART_NOTICE)) is None
