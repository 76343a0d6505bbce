"""The bytes of a file a Telegram message carried: ``getFile``, then the file endpoint.

``getFile`` goes through python-telegram-bot (which prefixes the ``file_path`` with
``base_file_url`` and the token); the download goes through the bot's own aiohttp session,
streamed in chunks. Too large (the size the message declared, the one ``getFile`` declared,
Telegram's "file is too big", Content-Length, or the bytes counted) is ``MediaTooLargeError``;
every other failure is ``MediaUnavailableError``. Neither message ever quotes an exception of
the HTTP layer or PTB: both can carry the download URL, and the URL carries the token.

A local Bot API server (``--local``) answers ``getFile`` with an absolute path on its own disk;
that is not supported (``MediaUnavailableError``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
from telegram.error import BadRequest, RetryAfter, TelegramError

from ..base import MediaTooLargeError, MediaUnavailableError
from ..media import Attachment
from ._client import BotConnection
from ._request import AiohttpRequest

__all__ = ["fetch_file"]

CHUNK = 64 * 1024


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


def _too_large(size: int | None, limit: int) -> MediaTooLargeError:
    said = f"is {_mb(size)}" if size is not None else "is larger"
    return MediaTooLargeError(f"the file {said}; files up to {_mb(limit)} are read", size=size, limit=limit)


async def fetch_file(connection: BotConnection, attachment: Attachment, *, limit: int,
                     read_timeout: float) -> AsyncIterator[bytes]:
    """The file's bytes as they arrive (see the module docstring for the errors)."""
    if attachment.size is not None and attachment.size > limit:
        raise _too_large(attachment.size, limit)
    bot = connection.bot
    if bot is None:
        raise MediaUnavailableError("the Telegram adapter is not connected")
    try:
        file = await bot.get_file(attachment.ref)
    except BadRequest as exc:
        if "too big" in exc.message.lower():
            # Telegram hands bots nothing over 20 MB, whatever our own limit.
            raise MediaTooLargeError("Telegram lets bots download files of up to 20 MB only",
                                     size=attachment.size, limit=limit) from None
        raise MediaUnavailableError("Telegram no longer has this file (it refused the file's id)") from None
    except RetryAfter:
        raise MediaUnavailableError("Telegram asked to wait before the file can be fetched") from None
    except (TelegramError, RuntimeError) as exc:
        # RuntimeError: the bot's HTTP client is closed (a disconnect).
        raise MediaUnavailableError(f"Telegram could not be asked for the file ({type(exc).__name__})") from None
    if file.file_size is not None and file.file_size > limit:
        raise _too_large(file.file_size, limit)
    url = file.file_path
    if not url or not url.startswith(f"{bot.base_file_url}/"):
        raise MediaUnavailableError(
            "Telegram gave no path to download the file from (a local Bot API server's files are not supported)"
        )
    request = bot.request
    if not isinstance(request, AiohttpRequest):  # pragma: no cover - BotConnection always builds one
        raise MediaUnavailableError("the Telegram adapter cannot download files")
    received = 0
    try:
        async with request.download(url, read_timeout=read_timeout) as resp:
            if resp.status != 200:
                raise MediaUnavailableError(f"Telegram's file server answered HTTP {resp.status}")
            length = resp.content_length
            if length is not None and length > limit:
                raise _too_large(length, limit)
            async for chunk in resp.content.iter_chunked(CHUNK):
                received += len(chunk)
                if received > limit:
                    raise _too_large(None, limit)
                yield chunk
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise MediaUnavailableError(f"the download from Telegram failed ({type(exc).__name__})") from None
    except RuntimeError:
        raise MediaUnavailableError("the Telegram adapter is not connected") from None
