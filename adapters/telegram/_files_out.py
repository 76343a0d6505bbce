"""Files out: an answer's files as Telegram messages, after its text.

Each file goes by the method ``_files_plan`` picks (photos, voice notes, audio, documents), runs of
photos, of documents and of audio files as albums (``sendMediaGroup``: the files are multipart parts
that the ``media`` JSON names as ``attach://<part>``), in the answer's chat and topic, the first one
quoting the question where ``send`` would have (in groups, when the text did not already). The bytes
are streamed from the stored file: python-telegram-bot is handed the open file (``read_file_handle=False``)
and aiohttp reads it in a worker thread as it sends, so a 50 MB file is never held in memory; a retry
opens it again.

Telegram's answers: a 429 is waited out in the chat (``Sender.call``, up to ``max_flood_wait``, then
``RateLimitedError``); 413 ``Request Entity Too Large`` is ``MediaTooLargeError``; a photo Telegram will
not take as one (``PHOTO_INVALID_DIMENSIONS``, ``IMAGE_PROCESS_FAILED``, too big for a photo, ``wrong file
identifier/HTTP URL specified``), or a voice note the person does not take (``VOICE_MESSAGES_FORBIDDEN``),
is sent again as a document (the rest of its album as before); a call that timed out is not repeated (it
may have arrived) and, like every other refusal, is an ``AdapterError`` whose message never has the token.
``sent(i)`` is awaited for each file as soon as its call (its album's) succeeded.
"""

from __future__ import annotations

import asyncio
import contextlib
import mimetypes
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import BinaryIO

import structlog
from telegram import InputFile, InputMediaAudio, InputMediaDocument, InputMediaPhoto, Message
from telegram.error import BadRequest, NetworkError, RetryAfter, TelegramError, TimedOut

from ..base import (
    AdapterError,
    MediaTooLargeError,
    MediaUnavailableError,
    OutboundMessage,
    RateLimitedError,
    SendResult,
)
from ..media import AttachmentKind, OutboundFile
from ..settings import reveal
from ._client import TelegramBot, retry_seconds
from ._files_plan import Method, method_for, next_group, photo_fits
from ._outbound import Sender, _Target
from ._settings import TelegramSettings

__all__ = ["FileSender", "upload_name"]

log = structlog.get_logger("hermes.telegram")

#: The slowest upload allowed for (bytes a second): a call's read timeout grows with what it uploads,
#: since Telegram answers only once the whole body has arrived.
_UPLOAD_RATE = 256 * 1024
#: Telegram's refusals of a file as its method that it takes as a document ("Bad Request: " stripped
#: and the first letter capitalised by python-telegram-bot: compared in lower case).
_AS_DOCUMENT = ("photo_invalid_dimensions", "image_process_failed", "too big for a photo",
                "photo_save_file_invalid", "photo_ext_invalid", "wrong file identifier",
                "voice_messages_forbidden")
_POSITION = re.compile(r"failed to send message #(\d+)")
_UNSAFE = re.compile(r"[\x00-\x1f\x7f/\\]+")


class _Refused(AdapterError):
    """Telegram would not take some files of a call by their method: their indexes, or every file of the
    call when it did not say which (each then goes alone)."""

    def __init__(self, indexes: list[int], *, known: bool, reason: str) -> None:
        super().__init__(reason)
        self.indexes, self.known, self.reason = indexes, known, reason


def upload_name(file: OutboundFile) -> str:
    """The name Telegram shows (and takes the type of a document from): the last part of ``file.name``,
    never a path, with the extension of its type when it has none."""
    name = _UNSAFE.sub("_", file.name.replace("\\", "/").rsplit("/", 1)[-1]).strip(" .") or "file"
    if "." not in name:
        name += mimetypes.guess_extension(file.mime.split(";", 1)[0].strip()) or ""
    return name[:200]


class FileSender:
    def __init__(self, settings: TelegramSettings, sender: Sender, limit: Callable[[], int]) -> None:
        """``limit()``: the adapter's ``max_upload_bytes``."""
        self._settings = settings
        self._sender = sender
        self._limit = limit

    async def send(self, target: OutboundMessage, files: Sequence[OutboundFile], *,
                   sent: Callable[[int], Awaitable[None]] | None = None) -> SendResult:
        if not files:
            return SendResult()
        fits = await asyncio.to_thread(
            lambda: [photo_fits(f.path, f.size) if f.kind is AttachmentKind.IMAGE else None for f in files])
        methods = [method_for(f, ok) for f, ok in zip(files, fits, strict=True)]
        sizes = [f.size for f in files]
        alone: set[int] = set()
        ids: list[str] = []
        async with self._sender.batch(target.chat_id) as bot:
            start = 0
            while start < len(files):
                group = next_group(methods, sizes, start, limit=self._limit(), alone=frozenset(alone))
                try:
                    ids.extend(await self._post(bot, target, files, methods, group))
                except _Refused as refused:
                    self._as_documents(target, files, methods, alone, refused)
                    continue
                self._sender.placed(target)
                if sent is not None:
                    for index in group:
                        await sent(index)
                start = group[-1] + 1
        log.info("telegram.files_sent", chat_id=target.chat_id, files=len(files), messages=len(ids))
        return SendResult(tuple(ids))

    def _as_documents(self, target: OutboundMessage, files: Sequence[OutboundFile], methods: list[Method],
                      alone: set[int], refused: _Refused) -> None:
        """The files Telegram refused go as documents next time (or, not knowing which, each alone)."""
        if not refused.known and len(refused.indexes) > 1:
            alone.update(refused.indexes)
            return
        for index in refused.indexes:
            if methods[index] is Method.DOCUMENT:
                raise AdapterError(f"Telegram refused the file {upload_name(files[index])!r}: {refused.reason}")
            log.warning("telegram.file_as_document", chat_id=target.chat_id, method=str(methods[index]),
                        reason=refused.reason)
            methods[index] = Method.DOCUMENT

    async def _post(self, bot: TelegramBot, target: OutboundMessage, files: Sequence[OutboundFile],
                    methods: Sequence[Method], group: list[int]) -> list[str]:
        """One call: a file, or an album; the ids of the messages it made."""
        chosen = [files[i] for i in group]
        size = sum(f.size for f in chosen)
        timeout = self._settings.request_timeout + size / _UPLOAD_RATE
        method = methods[group[0]]

        async def request(t: _Target) -> list[int]:
            async with _opened(chosen) as handles:
                if len(chosen) == 1:
                    message = await _send_one(bot, t, method, _input(chosen[0], handles[0], attach=False), timeout)
                    return [message.message_id]
                media = [_album_item(method, _input(f, h, attach=True)) for f, h in zip(chosen, handles, strict=True)]
                messages = await bot.send_media_group(t.chat, media, message_thread_id=t.thread,
                                                      reply_parameters=t.reply, read_timeout=timeout,
                                                      write_timeout=timeout)
                return [m.message_id for m in messages]

        place = await self._sender.place(bot, target)
        try:
            made = await self._sender.call(target.chat_id, place, request)
        except BadRequest as exc:
            raise self._refusal(exc, group, chosen) from None
        except RetryAfter as exc:
            delay = retry_seconds(exc)
            raise RateLimitedError(f"Telegram rate limit: could not send the files, Telegram asks to wait "
                                   f"{delay:.0f}s more than platforms.telegram.max_flood_wait allows", delay) from None
        except TimedOut:
            raise AdapterError(f"Telegram did not confirm the upload of {len(chosen)} file(s) in chat "
                               f"{target.chat_id} in time (it may have arrived, so it is not sent again)") from None
        except NetworkError as exc:
            if "request entity too large" in exc.message.lower() or "(413)" in exc.message:
                raise MediaTooLargeError(
                    f"Telegram refused the upload as too large ({size:,} bytes; platforms.telegram.max_upload_mb "
                    f"allows {self._limit():,})", size=size, limit=self._limit()) from None
            raise AdapterError(f"Telegram upload failed: {self._scrub(exc.message)}") from None
        except TelegramError as exc:
            raise AdapterError(f"Telegram refused the files: {self._scrub(exc.message)}") from None
        return [str(m) for m in made]

    def _refusal(self, exc: BadRequest, group: list[int], chosen: list[OutboundFile]) -> Exception:
        text = exc.message.lower()
        reason = self._scrub(exc.message)
        if not any(s in text for s in _AS_DOCUMENT):
            names = ", ".join(repr(upload_name(f)) for f in chosen)
            return AdapterError(f"Telegram refused {names}: {reason}")
        if len(group) == 1:
            return _Refused(group, known=True, reason=reason)
        position = _POSITION.search(text)
        if position is not None and 1 <= int(position.group(1)) <= len(group):
            return _Refused([group[int(position.group(1)) - 1]], known=True, reason=reason)
        return _Refused(group, known=False, reason=reason)

    def _scrub(self, text: str) -> str:
        # python-telegram-bot capitalises a description (lowering the rest): the token in any case.
        token = reveal(self._settings.token)
        return re.sub(re.escape(token), "<token>", text, flags=re.IGNORECASE) if token else text


@contextlib.asynccontextmanager
async def _opened(files: Sequence[OutboundFile]) -> AsyncIterator[list[BinaryIO]]:
    """The files open for reading (opened in a worker thread), closed after the call."""
    handles: list[BinaryIO] = []
    try:
        for file in files:
            try:
                handles.append(await asyncio.to_thread(file.path.open, "rb"))
            except OSError as exc:
                raise MediaUnavailableError(f"a stored file to send is not readable ({type(exc).__name__})") from None
        yield handles
    finally:
        for handle in handles:
            handle.close()


def _input(file: OutboundFile, handle: BinaryIO, *, attach: bool) -> InputFile:
    upload = InputFile(handle, filename=upload_name(file), attach=attach, read_file_handle=False)
    upload.mimetype = file.mime  # the type sniffed from the bytes, not guessed from the name
    return upload


def _album_item(method: Method, upload: InputFile) -> InputMediaPhoto | InputMediaDocument | InputMediaAudio:
    if method is Method.PHOTO:
        return InputMediaPhoto(upload)
    if method is Method.AUDIO:
        return InputMediaAudio(upload)
    return InputMediaDocument(upload, disable_content_type_detection=True)


async def _send_one(bot: TelegramBot, t: _Target, method: Method, upload: InputFile, seconds: float) -> Message:
    if method is Method.PHOTO:
        return await bot.send_photo(t.chat, upload, message_thread_id=t.thread, reply_parameters=t.reply,
                                    read_timeout=seconds, write_timeout=seconds)
    if method is Method.VOICE:
        return await bot.send_voice(t.chat, upload, message_thread_id=t.thread, reply_parameters=t.reply,
                                    read_timeout=seconds, write_timeout=seconds)
    if method is Method.AUDIO:
        return await bot.send_audio(t.chat, upload, message_thread_id=t.thread, reply_parameters=t.reply,
                                    read_timeout=seconds, write_timeout=seconds)
    # Telegram would show a video or an audio file sent as a document as such: it stays a file.
    return await bot.send_document(t.chat, upload, disable_content_type_detection=True, message_thread_id=t.thread,
                                   reply_parameters=t.reply, read_timeout=seconds, write_timeout=seconds)
