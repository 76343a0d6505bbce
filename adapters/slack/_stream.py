"""A Slack answer shown while the model writes it.

Where it can, the answer streams with Slack's chat streaming methods: ``chat.startStream``
opens a message with the text so far, ``chat.appendStream`` adds what was written since,
``chat.stopStream`` adds the rest and ends the streaming state. Their text is
``markdown_text``, which Slack renders itself (the model writes Markdown), so a streamed
message is never converted to mrkdwn. It cannot be done:

- at the top of a DM: a stream is always a reply in a thread (``thread_ts`` is required), and
  moving the answer into a thread under the user's message would move the conversation;
- in a channel whose author we do not know (Slack requires a recipient outside DMs);
- in a workspace without the methods (``unknown_method``): remembered per workspace, not asked again.

Otherwise the answer is posted and edited (``chat.update``) like an ordinary reply, in mrkdwn as
``Adapter.send`` formats it, continuing in a new message past ``SlackAdapter.split``.

A stream only grows. When the text it gets does not extend what it showed (the gateway dropped
the text of a model call that asked for tools), or an append may or may not have landed (the
connection broke), the stream is stopped and the message edited (``chat.update`` with
``markdown_text``) from then on. A stream Slack closed by itself (they last a few minutes) is
edited the same way.

The "thinking" placeholder: edited into the first message when the answer is posted and edited
(one message, as ``send`` does); replaced when the answer streams, since an ordinary message cannot
become a stream: the stream starts under it, then the placeholder is deleted. ``finish`` makes
sure no placeholder is left.

Every call goes through a client without retries (``make_web_client(retries=False)``): a 429 is
a ``RateLimitedError`` at once, and ``EditingStream.finish`` waits it out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from .._stream import EditingStream
from .._text import clean_text
from ..base import AdapterError, OutboundMessage, RateLimitedError, SendResult
from ._mrkdwn import to_mrkdwn
from ._webapi import api_error

__all__ = ["SlackStream", "StreamPlace", "StreamSupport"]

log = structlog.get_logger("hermes.slack")

#: Slack's answer to a method the workspace does not have ("This method is currently not available")
_NOT_AVAILABLE = frozenset({"unknown_method"})
_NO_RECIPIENT = frozenset({"missing_recipient_user_id", "missing_recipient_team_id"})
_NETWORK_ERRORS = (SlackClientError, aiohttp.ClientError, TimeoutError)


class StreamSupport:
    """The workspaces known to lack chat streaming (for the adapter's life)."""

    def __init__(self) -> None:
        self._missing: set[str] = set()

    def available(self, workspace: str) -> bool:
        return workspace not in self._missing

    def refuse(self, workspace: str) -> None:
        if workspace not in self._missing:
            self._missing.add(workspace)
            log.info("slack.streaming_unavailable", workspace=workspace, fallback="chat.update")


@dataclass(frozen=True)
class StreamPlace:
    """Where an answer goes, and for whom."""

    channel: str
    thread_ts: str | None  # None: the top level of a DM
    workspace: str  # the team (or enterprise) id: recipient_team_id, and the key of StreamSupport
    recipient: str | None  # the author of the message answered


def _retry_after(exc: SlackApiError) -> float:
    headers = getattr(exc.response, "headers", None) or {}
    for key, value in headers.items():
        if str(key).lower() == "retry-after":
            try:
                return float(value)
            except (TypeError, ValueError):
                break
    return 1.0


def _failure(exc: Exception, what: str) -> AdapterError:
    """Our error for a failed call (Slack's error code, never the request)."""
    if isinstance(exc, SlackApiError):
        if getattr(exc.response, "status_code", None) == 429:
            return RateLimitedError(f"Slack rate-limited {what}", _retry_after(exc))
        return AdapterError(f"Slack refused {what} ({api_error(exc)})")
    return AdapterError(f"Slack {what} failed ({type(exc).__name__})")


def _code(exc: SlackApiError) -> str | None:
    """Slack's error code, None for a rate limit (which is never a reason to change course)."""
    return None if getattr(exc.response, "status_code", None) == 429 else api_error(exc)


class SlackStream(EditingStream):
    def __init__(
        self,
        client: Callable[[], AsyncWebClient | None],
        split: Callable[[str], list[str]],
        place: StreamPlace,
        support: StreamSupport,
        *,
        claim: Callable[[], Awaitable[str | None]] | None = None,
        message_ids: Sequence[str] = (),
    ) -> None:
        """``client()``: the no-retry client; ``claim()``: take the answer's placeholder (its ts, or None)."""
        super().__init__(split, message_ids)
        self._client = client
        self._place = place
        self._support = support
        self._claim = claim
        self._placeholder: str | None = None
        #: a placeholder the answer did not use, to delete
        self._leftover: str | None = None
        #: messages in the streaming state -> the markdown appended so far
        self._streaming: dict[str, str] = {}
        #: messages whose text is markdown_text (streamed once); the rest are mrkdwn
        self._markdown: set[str] = set()
        #: messages an append may or may not have reached
        self._uncertain: set[str] = set()
        #: what each message shows, as sent (None: unknown, a message of a stream resumed after a restart)
        self._visible: dict[str, str | None] = dict.fromkeys(message_ids)
        self._no_recipient = False

    # ------------------------------------------------------------------ the stream

    async def finish(self, message: OutboundMessage) -> SendResult:
        text = clean_text(message.text)
        if not text.strip():
            # Slack refuses an empty message: what the stream showed goes, and nothing is shown.
            if self._leftover is None:
                self._leftover = await self._take_placeholder()
                self._placeholder = None
            while self._ids:
                await self._patiently(self._drop_last)
            await self._patiently(self._drop_leftover)
            return SendResult()
        result = await super().finish(replace(message, text=text))
        await self._patiently(self._drop_leftover)
        return result

    # ------------------------------------------------------------ EditingStream's calls

    async def _post(self, text: str, *, final: bool) -> str:
        placeholder = await self._take_placeholder()
        if not final and self._can_stream():
            ts = await self._start(text)
            if ts is not None:
                if placeholder is not None:
                    self._placeholder, self._leftover = None, placeholder
                    try:
                        await self._drop_leftover()
                    except AdapterError as exc:  # finish tries again
                        log.debug("slack.placeholder_not_deleted", chat_id=self._place.channel, error=str(exc))
                return ts
        body = to_mrkdwn(text)
        if placeholder is not None:
            try:
                await self._api().chat_update(channel=self._place.channel, ts=placeholder, text=body)
            except SlackApiError as exc:
                if _code(exc) is None:
                    raise _failure(exc, "an edit") from None
                # The placeholder was deleted meanwhile: the answer is posted as a new message.
                log.warning("slack.placeholder_lost", chat_id=self._place.channel, error=api_error(exc))
                self._placeholder = None
            except _NETWORK_ERRORS as exc:
                raise _failure(exc, "an edit") from None
            else:
                self._placeholder = None
                self._visible[placeholder] = body
                return placeholder
        try:
            resp = await self._api().chat_postMessage(channel=self._place.channel, text=body,
                                                      thread_ts=self._place.thread_ts)
        except (SlackApiError, *_NETWORK_ERRORS) as exc:
            raise _failure(exc, "a message") from None
        ts = resp.get("ts")
        if not isinstance(ts, str):
            raise AdapterError("Slack chat.postMessage answered without a ts")
        self._visible[ts] = body
        return ts

    async def _edit(self, message_id: str, text: str, *, final: bool) -> None:
        ts = message_id
        shown = self._streaming.get(ts)
        if shown is not None:
            if text.startswith(shown) and ts not in self._uncertain:
                rest = text[len(shown):]
                if final:
                    if await self._stop(ts, rest):
                        return
                elif not rest:
                    return
                elif await self._append(ts, rest):
                    return
            else:
                # A stream cannot take text back: it ends here and the message is edited from now on.
                await self._stop(ts, "")
        await self._update(ts, text)

    async def _delete(self, message_id: str) -> None:
        if message_id in self._streaming:
            await self._stop(message_id, "")
        await self._remove(message_id)

    # ------------------------------------------------------------------ Slack calls

    def _api(self) -> AsyncWebClient:
        client = self._client()
        if client is None:
            raise AdapterError("the Slack adapter is not connected")
        return client

    def _can_stream(self) -> bool:
        place = self._place
        if place.thread_ts is None or not self._support.available(place.workspace) or self._no_recipient:
            return False
        return place.channel.startswith("D") or place.recipient is not None

    async def _start(self, text: str) -> str | None:
        """A streaming message showing ``text``; None where Slack cannot stream it (then it is posted)."""
        place = self._place
        try:
            resp = await self._api().chat_startStream(
                channel=place.channel, thread_ts=place.thread_ts or "", markdown_text=text,
                recipient_user_id=place.recipient, recipient_team_id=place.workspace if place.recipient else None,
            )
        except SlackApiError as exc:
            code = _code(exc)
            if code in _NOT_AVAILABLE:
                self._support.refuse(place.workspace)
                return None
            if code in _NO_RECIPIENT:
                self._no_recipient = True
                return None
            raise _failure(exc, "a streamed message") from None
        except _NETWORK_ERRORS as exc:
            raise _failure(exc, "a streamed message") from None
        ts = resp.get("ts")
        if not isinstance(ts, str):
            raise AdapterError("Slack chat.startStream answered without a ts")
        self._streaming[ts] = text
        self._markdown.add(ts)
        self._visible[ts] = text
        return ts

    async def _append(self, ts: str, rest: str) -> bool:
        """Add ``rest`` to a streaming message; False: it is no longer streaming (edit it instead)."""
        try:
            await self._api().chat_appendStream(channel=self._place.channel, ts=ts, markdown_text=rest)
        except SlackApiError as exc:
            if _code(exc) == "message_not_in_streaming_state":
                self._closed(ts)
                return False
            raise _failure(exc, "an append") from None
        except _NETWORK_ERRORS as exc:
            self._uncertain.add(ts)  # it may have landed: the next change rewrites the whole message
            raise _failure(exc, "an append") from None
        self._streaming[ts] += rest
        self._visible[ts] = self._streaming[ts]
        return True

    async def _stop(self, ts: str, rest: str) -> bool:
        """End a message's streaming state, adding ``rest``; False: Slack had ended it already."""
        try:
            await self._api().chat_stopStream(channel=self._place.channel, ts=ts, markdown_text=rest or None)
        except SlackApiError as exc:
            if _code(exc) == "message_not_in_streaming_state":
                self._closed(ts)
                return False
            raise _failure(exc, "the end of a stream") from None
        except _NETWORK_ERRORS as exc:
            self._uncertain.add(ts)
            raise _failure(exc, "the end of a stream") from None
        shown = self._streaming.pop(ts) + rest
        self._visible[ts] = None if ts in self._uncertain else shown
        return True

    def _closed(self, ts: str) -> None:
        self._streaming.pop(ts, None)
        self._visible[ts] = None  # what it shows is not known for sure

    async def _update(self, ts: str, text: str) -> None:
        """Make message ``ts`` show ``text`` (markdown where it was streamed, else mrkdwn)."""
        markdown = ts in self._markdown
        body = text if markdown else to_mrkdwn(text)
        if self._visible.get(ts) == body:
            return
        args: dict[str, Any] = {"markdown_text": body} if markdown else {"text": body}
        try:
            await self._api().chat_update(channel=self._place.channel, ts=ts, **args)
        except SlackApiError as exc:
            if _code(exc) != "streaming_state_conflict":
                raise _failure(exc, "an edit") from None
            # A message of a stream cut off by a restart, still streaming: end it, then edit it.
            await self._api_call("the end of a stream", self._api().chat_stopStream(channel=self._place.channel, ts=ts))
            self._markdown.add(ts)
            await self._api_call("an edit", self._api().chat_update(channel=self._place.channel, ts=ts, markdown_text=text))
            body = text
        except _NETWORK_ERRORS as exc:
            raise _failure(exc, "an edit") from None
        self._uncertain.discard(ts)
        self._visible[ts] = body

    async def _remove(self, ts: str) -> None:
        try:
            await self._api().chat_delete(channel=self._place.channel, ts=ts)
        except SlackApiError as exc:
            if _code(exc) != "message_not_found":  # gone already
                raise _failure(exc, "a deletion") from None
        except _NETWORK_ERRORS as exc:
            raise _failure(exc, "a deletion") from None
        self._visible.pop(ts, None)

    @staticmethod
    async def _api_call(what: str, call: Awaitable[Any]) -> Any:
        try:
            return await call
        except (SlackApiError, *_NETWORK_ERRORS) as exc:
            raise _failure(exc, what) from None

    # ------------------------------------------------------------------ the placeholder

    async def _take_placeholder(self) -> str | None:
        """The answer's placeholder, claimed once (kept until the first message has used it)."""
        if self._claim is not None:
            claim, self._claim = self._claim, None
            self._placeholder = await claim()
        return self._placeholder

    async def _drop_leftover(self) -> None:
        if self._leftover is not None:
            await self._remove(self._leftover)
            self._leftover = None
