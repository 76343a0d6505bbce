"""The terminal as a platform ("cli"): each terminal chat connection is one chat.

The daemon's control socket (mode 0600, so only its owner can connect)
carries the terminal's lines here; this adapter turns them into
``InboundMessage``s and sends replies back to the connection that owns the
chat. The transport already proves who is typing, so messages are
pre-authorized.

Replies go through the delivery ledger (``supports_recovery``): when a
terminal has gone away, ``send`` fails, and the ledger keeps the reply as
undelivered with the reason. The answer itself is in the session's
transcript in any case, and ``hermes-gateway chat -c`` shows it in the recap.

An answer streams (``open_stream``) as ``delta`` events, each the text that
follows what the terminal printed, then the final ``reply`` (or ``notice``)
event as without a stream. A terminal cannot take text back: when the answer
drops text it showed (a model call's preamble before it asked for tools), a
``restart`` event carries the answer anew, which the terminal prints after a
blank line. The terminal prints of the final event only what it has not
printed yet (``gateway.cli.chat_output``).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from typing import Protocol

from ._append import AppendOnly
from .base import (
    Adapter,
    ChatType,
    Disposition,
    InboundMessage,
    OutboundMessage,
    ReplyStream,
    SendResult,
)
from .errors import ChatGoneError

__all__ = ["ChatGoneError", "ChatSink", "CliAdapter"]


class ChatSink(Protocol):
    """Where the events of one terminal chat go (a control-socket connection)."""

    async def push_event(self, event: str, text: str | None, reply_to: str | None) -> None:
        """Deliver one event; raises ``ConnectionError`` when the terminal is gone."""


class _TerminalStream(ReplyStream):
    """One answer printed in a terminal as the model writes it."""

    throttled = False

    def __init__(self, sink: ChatSink, target: OutboundMessage) -> None:
        self._sink = sink
        self._reply_to = target.reply_to
        self._id = f"{target.chat_id}:{target.reply_to or ''}"
        self._text = AppendOnly()

    @property
    def message_ids(self) -> tuple[str, ...]:
        return (self._id,) if self._text.started else ()

    async def update(self, text: str) -> None:
        new, restart = self._text.next(text)
        if new:
            await self._push("restart" if restart else "delta", new)

    async def finish(self, message: OutboundMessage) -> SendResult:
        await self._push(str(message.kind), message.text)
        return SendResult((self._id,))

    async def _push(self, event: str, text: str) -> None:
        try:
            await self._sink.push_event(event, text, self._reply_to)
        except ChatGoneError:
            raise
        except ConnectionError as exc:
            raise ChatGoneError(f"the terminal disconnected while the reply was written ({exc})") from None


class CliAdapter(Adapter):
    platform = "cli"
    # A terminal takes any length; one reply is one event.
    max_message_length = 10_000_000
    supports_recovery = True

    def __init__(self) -> None:
        super().__init__()
        self._chats: dict[str, ChatSink] = {}
        self._ids = itertools.count(1)
        self._stopped = asyncio.Event()

    # ---------------------------------------------------------------- lifecycle

    async def connect(self) -> None:
        self._stopped.clear()
        self.ready.set()
        await self._stopped.wait()

    async def disconnect(self) -> None:
        self.ready.clear()
        self._stopped.set()

    # -------------------------------------------------------------------- chats

    def open_chat(self, sink: ChatSink) -> str:
        """Register a terminal; its chat id (fresh for every connection)."""
        chat_id = f"term-{secrets.token_hex(6)}"
        self._chats[chat_id] = sink
        return chat_id

    def close_chat(self, chat_id: str) -> None:
        self._chats.pop(chat_id, None)

    @property
    def open_chats(self) -> int:
        return len(self._chats)

    def message(self, chat_id: str, text: str, *, user_id: str, user_name: str | None = None,
                message_id: str | None = None) -> InboundMessage:
        """The inbound message for one line typed in a terminal chat."""
        return InboundMessage(
            platform=self.platform,
            chat_id=chat_id,
            chat_type=ChatType.DM,
            user_id=user_id,
            user_name=user_name,
            text=text,
            message_id=message_id or str(next(self._ids)),
            # A line is handed over once over a live connection: nothing redelivers it.
            redeliverable=False,
            pre_authorized=True,
        )

    async def receive(self, message: InboundMessage) -> Disposition:
        if message.chat_id not in self._chats:
            raise ChatGoneError(f"terminal chat {message.chat_id} is not open")
        return await self.dispatch(message)

    # ------------------------------------------------------------------ output

    async def send(self, message: OutboundMessage) -> SendResult:
        sink = self._chats.get(message.chat_id)
        if sink is None:
            raise ChatGoneError("the terminal disconnected before the reply was ready")
        await sink.push_event(str(message.kind), message.text, message.reply_to)
        return SendResult((f"{message.chat_id}:{message.reply_to or ''}",))

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        sink = self._chats.get(target.chat_id)
        if sink is None or target.reply_to is None:
            return None  # ``send`` says the terminal is gone
        return _TerminalStream(sink, target)

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        sink = self._chats.get(chat_id)
        if sink is not None:
            await sink.push_event("typing", None, None)
