"""After the upgrade to documented thread keys, an active thread keeps its session.

The state.db is one the previous release left (``tests/storage/gateway_release``),
its Discord and Slack threads keyed ``:thread:``. The next message in such a
thread, described as its adapter describes it, must land in the session it had,
see the sessions it may ``/resume``, and keep its learning counters.
"""

from __future__ import annotations

import time
from pathlib import Path

from adapters.base import ChatType
from adapters.discord import DiscordAdapter, DiscordSettings
from adapters.slack import SlackAdapter, SlackSettings
from gateway.config import SessionResetConfig
from gateway.routing.session_index import SessionIndex
from gateway.routing.session_key import SessionKeySettings, build_session_key
from storage import ChatOwner, StateStore, WriterSettings, ops, ownership
from tests.storage import gateway_release as release

SETTINGS = WriterSettings(synchronous="NORMAL")


async def test_an_active_discord_thread_keeps_its_session_and_its_history(db_path: Path) -> None:
    release.build_release_db(db_path, now=time.time())
    adapter = DiscordAdapter(DiscordSettings(token="t"))
    message = adapter.inbound_in_thread("1100", ChatType.CHANNEL, "1200", user_id="alice", text="and then?")
    key = build_session_key(message, SessionKeySettings())
    assert key == release.DISCORD_THREAD_NEW
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        binding = await SessionIndex(store, SessionResetConfig()).resolve(key, message)
        assert (binding.session_id, binding.created) == (release.DISCORD_SESSION, False)
        owner = ChatOwner(key, "discord", "alice")
        owned = await store.read(lambda conn: ownership.owned_ids(conn, owner, limit=10))
        assert set(owned) == {release.DISCORD_SESSION, release.OLD_DISCORD_SESSION}
        counters = await store.read(lambda conn: ops.get_meta(conn, f"learning:{key}"))
        assert counters is not None and '"turns_since_memory": 3' in counters


async def test_a_per_user_slack_thread_keeps_its_session_and_queued_title(db_path: Path) -> None:
    release.build_release_db(db_path, now=time.time())
    adapter = SlackAdapter(SlackSettings(bot_token="xoxb-1", app_token="xapp-1"))
    message = adapter.inbound_in_thread("C042", ChatType.CHANNEL, "1714000000.000100", user_id="U7", text="more")
    key = build_session_key(message, SessionKeySettings(thread_sessions_per_user=True))
    assert key == release.SLACK_THREAD_NEW
    async with StateStore(db_path, writer_settings=SETTINGS) as store:
        index = SessionIndex(store, SessionResetConfig())
        assert await index.pending_title(key) == "Quarterly numbers"
        binding = await index.resolve(key, message)
        assert (binding.session_id, binding.created) == (release.SLACK_SESSION, False)
