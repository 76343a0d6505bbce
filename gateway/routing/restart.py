"""/restart's switch, and the "back" the next process says in the chat that asked.

A restart is a stop like SIGTERM's (intake closes, running turns drain within
``gateway.drain_timeout``, the writer drains) after which the process comes back: through systemd
when it runs under it (the exit code ``EX_RESTART``, which ``Restart=on-failure`` restarts), or by
``os.execv`` of itself otherwise (``gateway.cli.app``).

Never a restart loop: the request lives only in this process's memory (``RestartSwitch.requested``),
so nothing a new process reads can ask it to restart again; the /restart message itself is recorded
as answered (dedupe) before the process exits, so a redelivery of it is a duplicate. What is kept
in state.db is only the notice for the chat (a global setting, ``RESTART_NOTICE``): the next
process takes it and records its "back" message in the delivery ledger in one transaction, then
sends it, so a crash between the two sends it at most once more, marked as recovered, and never
with a restart.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import structlog

from adapters.base import OutboundMessage, SendKind
from gateway.routing.delivery import Delivery, record_reply
from storage import Store, settings

__all__ = ["EX_RESTART", "RESTART_NOTICE", "RestartNotice", "RestartSwitch", "announce_back", "take_notice"]

log = structlog.get_logger("hermes.restart")

#: the exit code of a stop for a restart under systemd (EX_TEMPFAIL: the unit's Restart=on-failure restarts it)
EX_RESTART = 75
#: the global setting that holds the chat to tell "back"
RESTART_NOTICE = "restart.notice"
BACK_TEXT = "✅ Back: the gateway restarted{took}."


@dataclass(frozen=True)
class RestartNotice:
    platform: str
    chat_id: str
    thread_id: str | None
    reply_to: str | None
    requested_at: float
    by: str | None = None

    def message(self, now: float) -> OutboundMessage:
        took = f" in {now - self.requested_at:.0f} s" if 0 <= now - self.requested_at < 3600 else ""
        return OutboundMessage(self.platform, self.chat_id, BACK_TEXT.format(took=took), self.thread_id,
                               self.reply_to, SendKind.REPLY)


def _parse(raw: str | None) -> RestartNotice | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return RestartNotice(str(data["platform"]), str(data["chat_id"]), data.get("thread_id"),
                             data.get("reply_to"), float(data["requested_at"]), data.get("by"))
    except (ValueError, KeyError, TypeError):
        log.warning("restart.notice_unreadable")
        return None


class RestartSwitch:
    """Asked once per process: the first /restart wins; a second one while it runs is told so."""

    def __init__(self, store: Store, stop: Callable[[], None]) -> None:
        self._store = store
        self._stop = stop
        self.requested = False

    async def request(self, notice: RestartNotice) -> bool:
        """Note the chat to tell "back" (awaited: it is committed) and mark this process as restarting;
        False when a restart is already under way. The stop itself comes with ``stop``."""
        if self.requested:
            return False
        self.requested = True
        raw = json.dumps(asdict(notice))
        now = time.time()
        await self._store.write(lambda c: settings.set_global(c, RESTART_NOTICE, raw, updated_by=notice.by, now=now))
        log.info("restart.requested", platform=notice.platform, by=notice.by)
        return True

    def stop(self) -> None:
        self._stop()


def take_notice(conn: sqlite3.Connection, platform: str,
                record: Callable[[sqlite3.Connection, OutboundMessage], int]) -> tuple[OutboundMessage, int] | None:
    """In one transaction: the "back" message for ``platform``'s chat, taken out of the settings and
    recorded in the ledger by ``record`` (its row id); None when no notice waits for that platform."""
    notice = _parse(settings.get_global(conn, RESTART_NOTICE))
    if notice is None:
        if settings.get_global(conn, RESTART_NOTICE) is not None:
            settings.set_global(conn, RESTART_NOTICE, None, updated_by=None, now=time.time())
        return None
    if notice.platform != platform:
        return None
    settings.set_global(conn, RESTART_NOTICE, None, updated_by=None, now=time.time())
    out = notice.message(time.time())
    return out, record(conn, out)


async def announce_back(store: Store, delivery: Delivery, platform: str) -> bool:
    """Tell the chat that asked for a restart that this process is up (once ``platform`` is connected);
    True when a "back" went out."""
    if not delivery.recoverable(platform):  # no ledger there (a chat nobody waits in): the notice goes
        await store.write(lambda c: take_notice(c, platform, lambda _c, _out: 0))
        return False
    taken = await store.write(lambda c: take_notice(c, platform, lambda c2, out: record_reply(c2, out, None, None)))
    if taken is None:
        return False
    out, ledger_id = taken
    sent = await delivery.send(out, ledger_id=ledger_id)
    log.info("restart.back_announced", platform=platform, sent=sent)
    return sent
