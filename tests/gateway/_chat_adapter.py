"""A chat adapter for tests: a real Adapter whose "platform" is this object.

It goes through the same router, lanes, ledger and delivery code as every
platform; only the wire is replaced by method calls.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable

from adapters.base import (
    Adapter,
    AdapterError,
    ChatType,
    Disposition,
    InboundMessage,
    OutboundMessage,
    SendResult,
)
from adapters.media import Attachment, OutboundFile


class ChatAdapter(Adapter):
    platform = "testchat"
    max_message_length = 4096
    max_upload_bytes = 1 * 2**20

    def __init__(self, platform: str = "testchat") -> None:
        super().__init__()
        self.platform = platform
        self.sent: list[OutboundMessage] = []
        self.typing: list[str] = []
        self._changed = asyncio.Condition()
        self._stopped = asyncio.Event()
        self._ids = itertools.count(1)
        self.fail_sends = 0
        #: (chat, file name, bytes) of every file sent, in order
        self.files: list[tuple[str, str, bytes]] = []
        #: the next send_files fails after this many files (None: it does not)
        self.fail_files_after: int | None = None

    async def connect(self) -> None:
        self._stopped.clear()
        self.ready.set()
        await self._stopped.wait()

    async def disconnect(self) -> None:
        self.ready.clear()
        self._stopped.set()

    async def send(self, message: OutboundMessage) -> SendResult:
        if self.fail_sends:
            self.fail_sends -= 1
            raise ConnectionError("simulated send failure")
        async with self._changed:
            self.sent.append(message)
            self._changed.notify_all()
        return SendResult((f"out-{len(self.sent)}",))

    async def send_files(self, target: OutboundMessage, files: tuple[OutboundFile, ...], *,
                         sent: Callable[[int], Awaitable[None]] | None = None) -> SendResult:
        ids = []
        for i, file in enumerate(files):
            if self.fail_files_after is not None and i >= self.fail_files_after:
                self.fail_files_after = None
                raise AdapterError("simulated upload failure")
            async with self._changed:
                self.files.append((target.chat_id, file.name, file.path.read_bytes()))
                self._changed.notify_all()
            ids.append(f"file-{len(self.files)}")
            if sent is not None:
                await sent(i)
        return SendResult(tuple(ids))

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.typing.append(chat_id)

    async def say(
        self,
        text: str,
        *,
        user: str = "u1",
        chat: str | None = None,
        chat_type: ChatType = ChatType.DM,
        thread: str | None = None,
        message_id: str | None = None,
        addressed: bool = True,
        attachments: tuple[Attachment, ...] = (),
    ) -> Disposition:
        return await self.dispatch(
            InboundMessage(
                platform=self.platform,
                chat_id=chat or user,
                chat_type=chat_type,
                user_id=user,
                text=text,
                message_id=message_id or f"m{next(self._ids)}",
                thread_id=thread,
                user_name=f"name-of-{user}",
                addressed=addressed,
                attachments=attachments,
            )
        )

    def to(self, chat: str) -> list[OutboundMessage]:
        return [m for m in self.sent if m.chat_id == chat]

    async def wait_sent(self, n: int, *, chat: str | None = None, timeout: float = 10.0) -> list[OutboundMessage]:
        """Wait until at least n messages went out (to ``chat`` if given)."""

        def enough() -> bool:
            return len(self.to(chat) if chat else self.sent) >= n

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(enough), timeout)
        return self.to(chat) if chat else list(self.sent)
