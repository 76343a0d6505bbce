"""A reply's row in the delivery ledger, written by the agent in the transaction that stores its
answer (a streamed answer's row exists from its first visible message on)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from adapters.base import OutboundMessage
from gateway.errors import ChatBusyError
from gateway.routing.delivery import record_stream, settle_reply

__all__ = ["ReplyOutbox"]


class ReplyOutbox:
    """One turn's reply: its ledger row's id once written."""

    def __init__(self, session_key: str, session_id: str, compose: Callable[[str], OutboundMessage],
                 *, fence: Callable[[Any], bool] | None = None) -> None:
        #: several nodes: whether this node still serves the chat, checked in the answer's
        #: transaction (False rolls the answer back: the chat's new owner answers it)
        self._fence = fence
        self._key = session_key
        self._session_id = session_id
        self._compose = compose
        self.id: int | None = None

    def record(self, conn: sqlite3.Connection, session_id: str, answer: str) -> None:
        # On the writer thread, after any stream op of this turn; a batch that is replayed
        # runs this again and the last id stands.
        if self._fence is not None and not self._fence(conn):
            raise ChatBusyError("this chat is served by another gateway node now")
        self.id = settle_reply(conn, self._compose(answer), self._key, session_id, self.id)

    def stream_op(self, message_ids: tuple[str, ...]) -> Callable[[sqlite3.Connection], None]:
        def op(conn: sqlite3.Connection) -> None:
            self.id = record_stream(conn, self._compose(""), self._key, self._session_id, message_ids, self.id)

        return op
