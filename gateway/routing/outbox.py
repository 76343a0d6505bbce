"""A reply's row in the delivery ledger, written by the agent in the transaction that stores its
answer (a streamed answer's row exists from its first visible message on); and, on several
nodes, the check that this node still serves the chat, in the transactions that store a turn's
question and its answer."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from adapters.base import OutboundMessage
from gateway.errors import LaneLostError
from gateway.routing.delivery import record_stream, settle_reply

__all__ = ["ReplyOutbox", "fenced"]

Fence = Callable[[Any], bool]


class ReplyOutbox:
    """One turn's reply: its ledger row's id once written."""

    def __init__(self, session_key: str, session_id: str, compose: Callable[[str], OutboundMessage]) -> None:
        self._key = session_key
        self._session_id = session_id
        self._compose = compose
        self.id: int | None = None

    def record(self, conn: sqlite3.Connection, session_id: str, answer: str) -> None:
        # On the writer thread, after any stream op of this turn; a batch that is replayed
        # runs this again and the last id stands.
        self.id = settle_reply(conn, self._compose(answer), self._key, session_id, self.id)

    def stream_op(self, message_ids: tuple[str, ...]) -> Callable[[sqlite3.Connection], None]:
        def op(conn: sqlite3.Connection) -> None:
            self.id = record_stream(conn, self._compose(""), self._key, self._session_id, message_ids, self.id)

        return op


def fenced(fence: Fence | None, op: Callable[..., None] | None) -> Callable[..., None] | None:
    """``op`` (or, without one, nothing but the check) run only while this node still serves the
    chat under the token its turn began with. Otherwise ``LaneLostError`` rolls the transaction
    back: a node that stalled past its lease stores neither the question nor the answer of a
    message the chat's new owner runs."""
    if fence is None:
        return op
    check = fence

    def run(conn: Any, *args: Any, **kwargs: Any) -> None:
        if not check(conn):
            raise LaneLostError("this chat is served by another gateway node now")
        if op is not None:
            op(conn, *args, **kwargs)

    return run
