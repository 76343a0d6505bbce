"""Files out: an answer's files as Discord messages with attachments.

Discord takes files with a message create as ``multipart/form-data``: ``payload_json`` (the message)
and ``files[n]`` (the bytes), at most 10 files a message ("Uploading Files" in Discord's API
reference; discord.py builds the request). A request whose files together exceed the upload limit
(10 MiB for a bot in a server without boosts) gets 413, code 40005 "Request entity too large". So
the files go in order, in groups: a group takes the next file while it has fewer than 10 and their
sizes together stay within ``max_upload_bytes`` (every single file fits it: the gateway checked).

**Sending twice.** Every message carries a ``nonce`` with ``enforce_nonce: true``: Discord then
looks for a message of the same author with that nonce from the last few minutes and, if there is
one, returns it instead of posting another. The nonce is a digest of where the files go (the
channel or thread and the message answered) and the ids of the group's files (their sha256), so a
retry after a crash gets the message that already went out, as long as it comes within Discord's
window; later, it posts again. Identical files sent to the same place in answer to the same message
within minutes are one message, which only a retry does.

The first message replies to ``reply_to`` when the answer's text did not already (a files-only
answer); 429s are waited out by discord.py up to ``max_ratelimit_wait`` (longer:
``RateLimitedError``).
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence

import aiohttp
import discord
import structlog

from ..base import (
    AdapterError,
    MediaTooLargeError,
    MediaUnavailableError,
    OutboundMessage,
    RateLimitedError,
    SendResult,
)
from ..media import OutboundFile
from ._outbound import Sender

__all__ = ["MAX_FILES", "FileSender", "groups", "nonce_of"]

log = structlog.get_logger("hermes.discord")

#: files one message may carry
MAX_FILES = 10
#: Discord's nonce is at most 25 characters
_NONCE_LENGTH = 25
_TOO_LARGE = 40005
_UNKNOWN_CHANNEL = 10003
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]+")


def groups(files: Sequence[OutboundFile], limit: int) -> Iterator[list[int]]:
    """The indexes of ``files``, in order, cut into messages: at most ``MAX_FILES`` each, their sizes together
    within ``limit`` (a file larger than ``limit`` alone goes alone, for Discord to refuse)."""
    group: list[int] = []
    total = 0
    for index, file in enumerate(files):
        if group and (len(group) == MAX_FILES or total + file.size > limit):
            yield group
            group, total = [], 0
        group.append(index)
        total += file.size
    if group:
        yield group


def nonce_of(channel: str, reply_to: str | None, files: Sequence[OutboundFile]) -> str:
    """The nonce of one message: the same place, question and files give the same one."""
    parts = [channel, reply_to or "", *(f.id or f"{f.name}:{f.size}" for f in files)]
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:_NONCE_LENGTH]


def filename(file: OutboundFile) -> str:
    """The name Discord shows: the last part of ``file.name`` (never a path), with an extension that matches
    its type when it has none (Discord shows an image inline by its extension)."""
    name = _UNSAFE.sub("_", file.name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .") or "file"
    if "." not in name:
        name += mimetypes.guess_extension(file.mime.split(";", 1)[0].strip()) or ""
    return name[:200]


class FileSender:
    def __init__(self, sender: Sender, limit: Callable[[], int], max_wait: float) -> None:
        """``limit()``: the adapter's ``max_upload_bytes``; ``max_wait``: ``max_ratelimit_wait``, for messages."""
        self._sender = sender
        self._limit = limit
        self._max_wait = max_wait

    async def send(self, target: OutboundMessage, files: Sequence[OutboundFile], *,
                   sent: Callable[[int], Awaitable[None]] | None = None) -> SendResult:
        ids: list[str] = []
        reply = self._sender.references(target)
        for group in groups(files, self._limit()):
            chosen = [files[i] for i in group]
            message_id = await self._post(target, chosen, reply=reply)
            reply = False
            ids.append(message_id)
            if sent is not None:
                for index in group:
                    await sent(index)
        return SendResult(tuple(ids))

    async def _post(self, target: OutboundMessage, chosen: list[OutboundFile], *, reply: bool) -> str:
        client, channel = await self._sender.place(target)
        try:
            try:
                message = await self._create(client, channel, target, chosen, reply=reply)
            except discord.NotFound as exc:
                if exc.code != _UNKNOWN_CHANNEL or target.thread_id is None or target.thread_id != target.reply_to:
                    raise
                client, channel = await self._sender.place(target, missing=True)
                message = await self._create(client, channel, target, chosen, reply=reply)
        except discord.HTTPException as exc:
            if exc.status == 413 or exc.code == _TOO_LARGE:
                size = sum(f.size for f in chosen)
                raise MediaTooLargeError(
                    f"Discord refused the upload as too large ({size:,} bytes; platforms.discord.max_upload_mb allows "
                    f"{self._limit():,}, and the server may allow less)", size=size, limit=self._limit()) from None
            raise AdapterError(
                f"Discord refused the files ({exc.status}, code {exc.code}: {exc.text or 'no detail'})") from None
        except discord.RateLimited as exc:
            raise RateLimitedError(
                f"Discord rate limit: could not send the files, Discord asks to wait {exc.retry_after:.0f}s, longer "
                f"than platforms.discord.max_ratelimit_wait ({self._max_wait:g}s)", exc.retry_after) from None
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise AdapterError(f"Discord upload failed ({type(exc).__name__})") from None
        log.info("discord.files_sent", chat_id=target.chat_id, message_id=message.id, files=len(chosen))
        return str(message.id)

    async def _create(self, client: discord.Client, channel: str, target: OutboundMessage,
                      chosen: list[OutboundFile], *, reply: bool) -> discord.Message:
        reference = discord.MessageReference(message_id=int(target.reply_to), channel_id=int(channel),
                                             fail_if_not_exists=False) if reply and target.reply_to else None
        opened: list[discord.File] = []
        try:
            for file in chosen:
                # discord.py streams the open file into the request (and rewinds it for a retry after a 429).
                opened.append(discord.File(str(file.path), filename=filename(file)))
        except OSError as exc:
            for handle in opened:
                handle.close()
            raise MediaUnavailableError(f"a stored file to send is not readable ({type(exc).__name__})") from None
        messageable = client.get_partial_messageable(int(channel))
        nonce = nonce_of(channel, target.reply_to, chosen)
        if reference is not None:
            return await messageable.send(files=opened, nonce=nonce, reference=reference)
        return await messageable.send(files=opened, nonce=nonce)
