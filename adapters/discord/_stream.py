"""The Discord answer as it is written: one message posted, then edited as the text grows.

Past 2000 characters the answer continues in a new message (the adapter's
``split``: code blocks closed at the cut and reopened after it). The first
message refers to the user's message and opens an ``auto_thread`` thread, as
``Adapter.send`` does (it is posted through the same ``Sender``); the others
are plain. Discord renders the live text as it renders the final one (the
adapter sends text as it is), so ``finish`` edits only what changed. Rate
limits come out as ``RateLimitedError`` (``_ratelimit``), never as a wait.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import discord

from .._stream import EditingStream
from ..base import AdapterError, OutboundMessage, RateLimitedError, SendKind
from ._client import DiscordClient
from ._outbound import Sender
from ._ratelimit import RateWindows

__all__ = ["DiscordStream"]

T = TypeVar("T")

_UNKNOWN_MESSAGE = 10008


class DiscordStream(EditingStream):
    formats_final = False

    def __init__(self, target: OutboundMessage, *, sender: Sender, client: Callable[[], DiscordClient | None],
                 windows: RateWindows, split: Callable[[str], list[str]], message_ids: Sequence[str] = ()) -> None:
        super().__init__(split, message_ids)
        self._target = target
        self._sender = sender
        self._client = client
        self._windows = windows

    @property
    def _channel_id(self) -> str:
        return self._target.thread_id or self._target.chat_id

    async def _post(self, text: str, *, final: bool) -> str:
        if not text:
            raise AdapterError("Discord cannot show an empty message")
        # Only the answer's first message refers to the question (as the chunks of a sent answer).
        reply_to = self._target.reply_to if not self._ids else None
        message = dataclasses.replace(self._target, text=text, reply_to=reply_to, kind=SendKind.REPLY)
        with self._windows.surfaced("POST", self._channel_id):
            result = await self._sender.send(message)
        return result.message_ids[0]

    async def _edit(self, message_id: str, text: str, *, final: bool) -> None:
        async def edit(message: discord.PartialMessage) -> None:
            await message.edit(content=text)

        await self._call("PATCH", message_id, "edit", edit)

    async def _delete(self, message_id: str) -> None:
        async def delete(message: discord.PartialMessage) -> None:
            try:
                await message.delete()
            except discord.NotFound as exc:
                if exc.code != _UNKNOWN_MESSAGE:
                    raise  # already gone is what was asked

        await self._call("DELETE", message_id, "delete", delete)

    async def _call(self, method: str, message_id: str, what: str,
                    call: Callable[[discord.PartialMessage], Awaitable[T]]) -> T:
        client = self._client()
        if client is None or client.is_closed():
            raise AdapterError("the Discord adapter is not connected")
        try:
            message = client.get_partial_messageable(int(self._channel_id)).get_partial_message(int(message_id))
        except ValueError:
            raise AdapterError(f"not a Discord message id: {message_id!r}") from None
        try:
            with self._windows.surfaced(method, self._channel_id):
                return await call(message)
        except discord.NotFound as exc:
            if exc.code == _UNKNOWN_MESSAGE:
                raise AdapterError(f"Discord message {message_id} of the streamed answer is gone") from None
            raise _failed(exc, what) from None
        except discord.HTTPException as exc:
            raise _failed(exc, what) from None
        except discord.RateLimited as exc:
            raise RateLimitedError(f"Discord rate limit: could not {what} the message", exc.retry_after) from None


def _failed(exc: discord.HTTPException, what: str) -> AdapterError:
    return AdapterError(f"Discord could not {what} the message ({exc.status}, code {exc.code}: {exc.text or 'no detail'})")
