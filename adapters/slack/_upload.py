"""Files out: an answer's files shared in its Slack thread, the way ``files_upload_v2`` does it.

Slack's external upload, per file: ``files.getUploadURLExternal`` (name, length) gives an upload URL
and a file id; the bytes are POSTed to that URL (no token: the URL is the credential, so it never
appears in an error or a log); then one ``files.completeUploadExternal`` shares the files with
``channel_id`` and ``thread_ts``: Slack shows them as one message. Scope ``files:write`` (and
``files:read``, which the inbound files need anyway).

The steps are the SDK's own methods; only the POST is done here rather than through
``files_upload_v2``, which reads every file whole into memory on the event loop (up to 1 GB) first.
Here the file is streamed from disk (aiohttp reads it in a worker thread), and only to Slack's file host
(files.slack.com, or ``api_base_url``'s origin: a proxy, the emulator in tests).

Files go in groups of 10 (what Slack's app shares in one message; ``completeUploadExternal`` fails
with more than about 14), in order; ``sent`` is told each file of a group after its share. A 429 is
waited out by the client's rate-limit handler (``rate_limit_retries`` times, each its Retry-After), then
``RateLimitedError``. ``file_upload_size_restricted`` is ``MediaTooLargeError``; every other refusal
an ``AdapterError`` with Slack's error code. Slack has no idempotency key for shares: a crash between
the share and the ledger's note of it sends those files again.

A files-only answer takes the "thinking" placeholder off (the text of an answer would have replaced it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from .._http_fetch import Origin
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
from ._webapi import api_error

__all__ = ["MAX_FILES", "FileUploader"]

log = structlog.get_logger("hermes.slack")

MAX_FILES = 10
_TOO_LARGE = frozenset({"file_upload_size_restricted"})
_SCOPE_HINT = "the app needs the files:write scope: add it under OAuth & Permissions and reinstall the app"
CONNECT_TIMEOUT = 15.0


def _groups(count: int) -> Iterator[range]:
    for start in range(0, count, MAX_FILES):
        yield range(start, min(count, start + MAX_FILES))


def _name(file: OutboundFile) -> str:
    """The last part of ``file.name``: never a path."""
    name = file.name.replace("\\", "/").rsplit("/", 1)[-1]
    return "".join(c for c in name if c.isprintable()).strip() or "file"


def _retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    for key, value in headers.items():
        if str(key).lower() == "retry-after":
            try:
                return max(0.0, float(value[0] if isinstance(value, list) else value))
            except (TypeError, ValueError, IndexError):
                break
    return 1.0


class FileUploader:
    def __init__(self, sender: Sender, client: Callable[[], AsyncWebClient | None],
                 session: Callable[[], aiohttp.ClientSession | None], hosts: frozenset[Origin],
                 limit: Callable[[], int], timeout: float) -> None:
        """``client()``/``session()``: the connection's Web API client and HTTP session; ``hosts``: where bytes
        may be posted; ``limit()``: the adapter's ``max_upload_bytes``; ``timeout``: a call's, in seconds."""
        self._sender = sender
        self._client = client
        self._session = session
        self._hosts = hosts
        self._limit = limit
        self._timeout = timeout

    async def send(self, target: OutboundMessage, files: Sequence[OutboundFile], *,
                   sent: Callable[[int], Awaitable[None]] | None = None) -> SendResult:
        client, session = self._client(), self._session()
        if client is None or session is None or session.closed:
            raise AdapterError("the Slack adapter is not connected")
        placeholder = await self._sender.claim(target)
        ids: list[str] = []
        for group in _groups(len(files)):
            ids.extend(await self._share(client, session, target, [files[i] for i in group]))
            if sent is not None:
                for index in group:
                    await sent(index)
        if placeholder is not None:
            await self._drop_placeholder(client, target.chat_id, placeholder)
        return SendResult(tuple(ids))

    async def _share(self, client: AsyncWebClient, session: aiohttp.ClientSession, target: OutboundMessage,
                     chosen: list[OutboundFile]) -> list[str]:
        """Upload ``chosen`` and share them as one message; the ts of that message (else the file ids)."""
        shared: list[dict[str, str | None]] = []
        try:
            for file in chosen:
                name = _name(file)
                try:
                    url_response = await client.files_getUploadURLExternal(filename=name, length=file.size)
                except SlackApiError as exc:
                    raise self._refused(exc, "the upload", file.size) from None
                upload_url, file_id = url_response.get("upload_url"), url_response.get("file_id")
                if not isinstance(upload_url, str) or not isinstance(file_id, str):
                    raise AdapterError("Slack files.getUploadURLExternal answered without an upload URL")
                await self._post(session, upload_url, file)
                shared.append({"id": file_id, "title": name})
            try:
                done = await client.files_completeUploadExternal(files=shared, channel_id=target.chat_id,
                                                                 thread_ts=target.thread_id)
            except SlackApiError as exc:
                raise self._refused(exc, "the files", sum(f.size for f in chosen)) from None
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            raise AdapterError(f"Slack upload failed ({type(exc).__name__})") from None
        ts = _share_ts(done.get("files"), target.chat_id)
        log.info("slack.files_sent", chat_id=target.chat_id, thread_id=target.thread_id, files=len(chosen), ts=ts)
        return [ts] if ts is not None else [str(item["id"]) for item in shared]

    async def _post(self, session: aiohttp.ClientSession, url: str, file: OutboundFile) -> None:
        if Origin.of(url) not in self._hosts:
            # The bytes go only where Slack keeps files: never to a host an answer names.
            raise AdapterError("Slack gave an upload URL outside its file host; the file was not sent")
        try:
            handle = file.path.open("rb")
        except OSError as exc:
            raise MediaUnavailableError(f"a stored file to send is not readable ({type(exc).__name__})") from None
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT, sock_read=self._timeout)
        with handle:
            async with session.post(url, data=handle, timeout=timeout, allow_redirects=False,
                                    headers={"Content-Type": "application/octet-stream"}) as response:
                await response.read()
                if response.status != 200:
                    raise AdapterError(f"Slack refused the bytes of a file (HTTP {response.status})")

    def _refused(self, exc: SlackApiError, what: str, size: int) -> AdapterError:
        code = api_error(exc)
        if getattr(exc.response, "status_code", None) == 429 or code == "ratelimited":
            return RateLimitedError(f"Slack rate-limited {what}", _retry_after(exc))
        if code in _TOO_LARGE:
            return MediaTooLargeError(f"Slack refused the file as too large ({code}, {size:,} bytes)", size=size,
                                      limit=self._limit())
        hint = f": {_SCOPE_HINT}" if code == "missing_scope" else ""
        return AdapterError(f"Slack refused {what} ({code}{hint})")

    async def _drop_placeholder(self, client: AsyncWebClient, channel: str, ts: str) -> None:
        try:
            await client.chat_delete(channel=channel, ts=ts)
        except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("slack.placeholder_left", chat_id=channel, error=type(exc).__name__)


def _share_ts(files: Any, channel: str) -> str | None:
    """The ts of the message that shares ``files`` in ``channel``, where Slack says it already."""
    for item in files if isinstance(files, list) else ():
        shares = item.get("shares") if isinstance(item, dict) else None
        for kind in ("public", "private"):
            places = shares.get(kind) if isinstance(shares, dict) else None
            found = places.get(channel) if isinstance(places, dict) else None
            if isinstance(found, list) and found and isinstance(found[0], dict):
                ts = found[0].get("ts")
                if isinstance(ts, str):
                    return ts
    return None
