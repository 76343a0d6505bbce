"""What the model reasoned, shown before its answer when the session asked for it (``/reasoning on``).

The reasoning itself is always stored with the answer (the v11 ``reasoning_content``
column) and never sent as the answer; this module only shows it. The switch is a setting
of the session (``storage.settings``, name ``reasoning``, "on" or "off"), so ``/new`` starts
without it; a session that compression continued (its child) follows its parent's switch
until it is given one of its own.

It goes out as a message of its own, kind ``SendKind.REASONING``, before the answer: an
adapter that can collapse it (``Adapter.collapses_reasoning``: Telegram's expandable
blockquote) gets the text as it is; every other platform gets a Markdown quote under a
heading, which Discord and Slack show as a quoted block. It is a courtesy: not in the
delivery ledger (a crash does not repeat it) and a failure to send it never costs the answer.
"""

from __future__ import annotations

import sqlite3
import time

import structlog

from adapters.base import Adapter, InboundMessage, OutboundMessage, SendKind
from gateway.logs import redact
from storage import Store, queries, settings

__all__ = ["REASONING_SETTING", "quoted_reasoning", "reasoning_shown", "set_reasoning_shown", "show_reasoning"]

log = structlog.get_logger("hermes.router")

REASONING_SETTING = "reasoning"
#: at most this much of the reasoning is shown (it fits one message on every platform); the rest is
#: in state.db
SHOWN_CHARS = 3000
HEADING = "💭 Reasoning"


def _shown(conn: sqlite3.Connection, session_id: str) -> bool:
    """The switch of the session, or of the nearest session it was compressed from that has one."""
    for session in queries.lineage_ancestors(conn, session_id):
        value = settings.get_session(conn, str(session["id"]), REASONING_SETTING)
        if value is not None:
            return value == "on"
    return False


async def reasoning_shown(store: Store, session_id: str) -> bool:
    return await store.read(lambda c: _shown(c, session_id))


async def set_reasoning_shown(store: Store, session_id: str, shown: bool) -> None:
    now = time.time()
    await store.write(lambda c: settings.set_session(c, session_id, REASONING_SETTING,
                                                     "on" if shown else "off", now=now))


def _capped(reasoning: str) -> str:
    text = reasoning.strip()
    if len(text) <= SHOWN_CHARS:
        return text
    return f"{text[:SHOWN_CHARS].rstrip()}… ({len(text) - SHOWN_CHARS} more characters)"


def quoted_reasoning(reasoning: str) -> str:
    """The reasoning as a Markdown quote under a heading (platforms that cannot collapse it)."""
    lines = "\n".join(f"> {line}" if line.strip() else ">" for line in _capped(reasoning).split("\n"))
    return f"{HEADING}\n{lines}"


async def show_reasoning(store: Store, adapter: Adapter | None, msg: InboundMessage, session_id: str,
                         reasoning: str | None) -> None:
    """Send ``reasoning`` to ``msg``'s chat when its session shows reasoning; never raises."""
    if not reasoning or not reasoning.strip() or adapter is None:
        return
    try:
        if not await reasoning_shown(store, session_id):
            return
        text = _capped(reasoning) if adapter.collapses_reasoning else quoted_reasoning(reasoning)
        await adapter.send(OutboundMessage(msg.platform, msg.chat_id, redact(text), msg.thread_id, msg.message_id,
                                           SendKind.REASONING))
    except Exception as exc:  # the answer still goes out
        log.warning("router.reasoning_not_shown", error_type=type(exc).__name__, error=str(exc)[:200])
