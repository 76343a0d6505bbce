"""The protocol every platform adapter implements, and the types it speaks.

An adapter translates between a platform and these types. It never decides
sessions, authorization or commands: that is the router's job.
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol

from .approvals import ApprovalPrompt
from .errors import (
    AdapterError,
    FatalAdapterError,
    MalformedUpdateError,
    MediaError,
    MediaTooLargeError,
    MediaUnavailableError,
    RateLimitedError,
)
from .media import Attachment, OutboundFile

# The adapters' errors (``adapters.errors``) are part of the protocol: exported here with it.
__all__ = [
    "Adapter",
    "AdapterError",
    "AdapterStateView",
    "ChatInfo",
    "ChatType",
    "Disposition",
    "FatalAdapterError",
    "InboundMessage",
    "MalformedUpdateError",
    "MediaError",
    "MediaTooLargeError",
    "MediaUnavailableError",
    "MessageHandler",
    "OutboundMessage",
    "RateLimitedError",
    "ReplyError",
    "ReplyStream",
    "SendKind",
    "SendResult",
    "TokenUsage",
]


class ChatType(StrEnum):
    DM = "dm"
    GROUP = "group"
    CHANNEL = "channel"
    THREAD = "thread"


class SendKind(StrEnum):
    REPLY = "reply"  # the agent's answer to a message (goes through the delivery ledger)
    NOTICE = "notice"  # the final word on a message that got no agent answer: command output, errors
    ACK = "ack"  # an interim acknowledgement ("queued"); the answer follows later
    REASONING = "reasoning"  # what the model reasoned, before its answer (/reasoning on); not in the ledger


class Disposition(StrEnum):
    """What the router did with an inbound message."""

    ACCEPTED = "accepted"  # a turn or a command will answer it
    ANSWERED = "answered"  # answered at once with a notice
    DUPLICATE = "duplicate"  # seen before; no second turn
    REFUSED = "refused"  # sender not authorized
    IGNORED = "ignored"  # not addressed to the bot
    #: not taken: storage is away and nothing was stored or answered; the platform should deliver
    #: it again (only for a message whose platform does: ``InboundMessage.platform_retries``)
    DEFERRED = "deferred"


@dataclass(frozen=True)
class InboundMessage:
    """A platform-neutral message, as the adapter received it."""

    platform: str
    chat_id: str
    chat_type: ChatType
    user_id: str | None
    text: str
    message_id: str | None = None
    thread_id: str | None = None
    user_name: str | None = None
    chat_name: str | None = None
    timestamp: float = field(default_factory=time.time)
    reply_to: str | None = None
    # What identifies a redelivery of this message on its platform; defaults
    # to chat + message id (message ids are per chat on some platforms).
    dedupe_id: str | None = None
    # False where a message can never be delivered twice (an HTTP request
    # without an idempotency key): no dedupe record is written for it.
    redeliverable: bool = True
    # Set by adapters whose transport already authenticated the sender
    # (the local HTTP API's bearer key); platform allowlists do not apply.
    pre_authorized: bool = False
    # The adapter saw the bot addressed (mention, reply to the bot, DM).
    addressed: bool = True
    # A caller waits for exactly one final message in answer to this one (an HTTP
    # request): a stopped turn still owes it one, and a retry of it (same
    # ``dedupe_id``) gets the first one's answer instead of nothing.
    awaits_answer: bool = False
    #: The platform delivers it again when the gateway does not take it now (Telegram's
    #: getUpdates and webhook, Slack's Events API): with storage away the router then answers
    #: ``Disposition.DEFERRED`` and the adapter leaves it unacknowledged, instead of a notice.
    platform_retries: bool = False
    #: files that came with it (``text`` is then their caption, possibly empty); nothing is
    #: downloaded until the router let the sender in (``Adapter.fetch``)
    attachments: tuple[Attachment, ...] = ()
    raw: Any = field(default=None, compare=False, repr=False)

    @property
    def delivery_key(self) -> str | None:
        if not self.redeliverable:
            return None
        if self.dedupe_id is not None:
            return self.dedupe_id
        if self.message_id is None:
            return None
        return f"{self.chat_id}:{self.message_id}"


@dataclass(frozen=True)
class ReplyError:
    """What an error notice stands for, in HTTP terms (the gateway fills it from its one
    error mapping; an adapter that answers over HTTP uses it, the others show the text)."""

    status: int
    type: str  # OpenAI's error types: invalid_request_error, rate_limit_error, server_error, ...
    code: str
    retry_after: float | None = None  # seconds, for a 429 or 503


@dataclass(frozen=True)
class TokenUsage:
    """The model's token counts for a turn, summed over its calls."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class OutboundMessage:
    platform: str
    chat_id: str
    text: str
    thread_id: str | None = None
    reply_to: str | None = None
    kind: SendKind = SendKind.REPLY
    #: set on a notice that reports a failure (the text says it to a person)
    error: ReplyError | None = None
    #: set on the agent's answer
    usage: TokenUsage | None = None
    #: files that go with it (the agent's ``send_file``, images its answer links to), sent after
    #: the text by ``Adapter.send_files``; ``text`` may be "" when there are only files
    files: tuple[OutboundFile, ...] = ()


@dataclass(frozen=True)
class SendResult:
    message_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChatInfo:
    chat_id: str
    chat_type: ChatType
    name: str | None = None


MessageHandler = Callable[[InboundMessage], Awaitable[Disposition]]


class ReplyStream(abc.ABC):
    """One answer shown on a platform while the model writes it.

    The gateway drives it (``gateway.routing.streaming``): ``update`` with the
    whole text so far, then ``finish`` exactly once with the final message (the
    answer, a stopped answer's partial text, or an error notice). A throttled
    stream (chat messages edited in place) gets an update no more often than
    ``streaming.edit_interval``, and its first once ``streaming.min_chars`` or
    ``streaming.first_delay`` is reached; an unthrottled one (SSE, a terminal)
    gets one as soon as there is new text. ``update`` shows plain text;
    ``finish`` formats it the way ``Adapter.send`` would and may spread it over
    several messages. Whatever ``update`` did, ``finish`` ends with exactly the
    final text visible.

    Text of a model call that turned out to ask for tools is dropped from the
    text ``update`` gets: a stream that cannot take text back (SSE, a terminal)
    sees the text shrink, and shows the new text after what it already showed.
    """

    #: updates cost a platform call each and are rate limited (see above)
    throttled: bool = True
    #: ``finish`` edits what ``update`` showed, so it keeps the chat's edit pace too; False where
    #: it sends a new message instead (a draft's answer), which need not wait for that pace
    finish_edits: bool = True

    @property
    @abc.abstractmethod
    def message_ids(self) -> tuple[str, ...]:
        """The platform messages this stream has made so far, in order (the delivery ledger keeps
        them, so that a restart can finish what a crash cut off)."""

    @abc.abstractmethod
    async def update(self, text: str) -> None:
        """Show ``text``, the answer so far. Raises ``RateLimitedError`` when the platform asks to
        wait (nothing was shown), another ``AdapterError`` when it failed (the gateway stops
        updating, and still calls ``finish``)."""

    @abc.abstractmethod
    async def finish(self, message: OutboundMessage) -> SendResult:
        """Leave exactly ``message.text`` visible, formatted as ``Adapter.send`` would (``kind``,
        ``error`` and ``usage`` as there); waits out rate limits itself. Every message id of the
        answer, or ``AdapterError`` when it could not (the gateway then sends the message anew)."""


class AdapterStateView(Protocol):
    """What the gateway's supervisor reports about one adapter, as health, status and metrics read it.

    ``state`` is one of "starting", "connected", "restarting", "failed", "stopped";
    ``restarts`` counts the reconnects after a failure; ``last_error`` is the
    failure's message (None until one happened).
    """

    @property
    def name(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def restarts(self) -> int: ...

    @property
    def last_error(self) -> str | None: ...


class Adapter(abc.ABC):
    """One platform. ``connect`` runs until the adapter stops or fails."""

    platform: str = "unknown"
    #: the longest single message the platform accepts (in its own units)
    max_message_length: int = 4096
    #: replies cut off by a crash can be sent later (false where a request
    #: waits for its answer, like the local HTTP API)
    supports_recovery: bool = True
    #: the largest file ``send_files`` can send (bytes); the gateway sends a note instead of a larger one
    max_upload_bytes: int = 0
    #: a message in a thread of a channel is reported as a ``THREAD`` chat (Discord, Slack);
    #: elsewhere (Telegram topics) it keeps its chat's type, with the thread id beside it
    threads_are_chats: bool = False
    #: the largest file the gateway downloads (``media.max_download_mb``; the gateway sets it): an
    #: adapter that may choose among sizes of one file (Telegram's photos) picks within it
    max_download_bytes: int = 20 * 2**20
    #: a ``SendKind.REASONING`` message is shown collapsed (Telegram's expandable blockquote) from its
    #: plain text; elsewhere the gateway sends it as a Markdown quote
    collapses_reasoning: bool = False

    def __init__(self) -> None:
        self._handler: MessageHandler | None = None
        #: set by the adapter once it is connected and can send
        self.ready = asyncio.Event()

    @property
    def account_id(self) -> str | None:
        """The bot account this adapter speaks as, stable across restarts and known once connected
        (Telegram: the bot's user id from getMe; Discord: the bot's user id; Slack: ``team:bot user``).
        What pairing approved is scoped to it. None: not connected yet, or no bot account (the HTTP
        API, the terminal chat)."""
        return None

    def bind(self, handler: MessageHandler) -> None:
        """The router's entry point; adapters call it for every inbound message."""
        self._handler = handler

    async def dispatch(self, message: InboundMessage) -> Disposition:
        if self._handler is None:
            raise AdapterError(f"{self.platform} adapter received a message before it was bound")
        return await self._handler(message)

    @abc.abstractmethod
    async def connect(self) -> None:
        """Connect and serve; returns when disconnected. Raises on failure."""

    @abc.abstractmethod
    async def disconnect(self) -> None:
        """Stop intake and release resources; idempotent."""

    @abc.abstractmethod
    async def send(self, message: OutboundMessage) -> SendResult:
        """Deliver one message (already split to ``max_message_length``)."""

    async def send_typing(self, chat_id: str, thread_id: str | None = None) -> None:  # noqa: B027
        """Show that a reply is being prepared, where the platform can."""

    async def get_chat_info(self, chat_id: str) -> ChatInfo:
        return ChatInfo(chat_id=chat_id, chat_type=ChatType.DM)

    async def create_thread(self, chat_id: str, name: str, *, from_message_id: str | None = None) -> str | None:
        """Open a thread for a conversation; None where the platform has none."""
        return None

    async def handoff_refusal(self, chat_id: str, chat_type: ChatType, thread_id: str | None) -> str | None:
        """Why a conversation moved into this chat (by /handoff) could not continue there, or None.

        Override where ``create_thread`` makes something that later messages
        would not be recognised as part of (they would not carry its id).
        """
        return None

    def inbound_in_thread(self, chat_id: str, chat_type: ChatType, thread_id: str | None, *,
                          user_id: str | None, text: str) -> InboundMessage:
        """A message that ``user_id`` sends later in ``thread_id`` of ``chat_id`` (None: the
        chat itself), described exactly as this adapter describes such a real message
        (chat id, chat type, thread id, user), so the router's key for it is the key
        those messages will get. ``chat_type`` is the chat's own type as its messages
        reported it.
        """
        if thread_id is not None and self.threads_are_chats and chat_type is not ChatType.DM:
            chat_type = ChatType.THREAD
        return InboundMessage(platform=self.platform, chat_id=chat_id, chat_type=chat_type, user_id=user_id,
                              text=text, thread_id=thread_id)

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        """A stream for the answer to ``target`` (its chat, thread and reply_to); None where this
        adapter does not stream (or ``platforms.<name>.streaming`` is off). Sends nothing yet."""
        return None

    def resume_stream(self, target: OutboundMessage, message_ids: tuple[str, ...]) -> ReplyStream | None:
        """After a restart: a stream over the messages a cut-off stream left, so that its
        ``finish`` edits them into the recovered text; None: the text goes out as new messages."""
        return None

    async def send_files(self, target: OutboundMessage, files: tuple[OutboundFile, ...], *,
                         sent: Callable[[int], Awaitable[None]] | None = None) -> SendResult:
        """Send ``files`` to ``target``'s chat (thread, reply_to), after its text was sent.

        The adapter groups them as its platform allows (a Telegram album of images), keeps
        their order, and returns the ids of the messages that carry them. Every file fits
        ``max_upload_bytes`` (the gateway checked). ``RateLimitedError`` is waited out;
        another ``AdapterError`` fails the delivery (the ledger keeps the reply to retry).
        ``await sent(i)`` is called with the index of each file as soon as the platform has
        it (for a group, each of its files after the group's call), so that a retry after a
        crash sends only the files that did not go out.
        """
        raise MediaUnavailableError(f"{self.platform} cannot send files")

    def file_link(self, file: OutboundFile) -> str | None:
        """Where a person can get ``file``, for an adapter that cannot send files
        (``max_upload_bytes`` 0) but can serve them (the HTTP API's ``/v1/files/<id>``); None: nowhere."""
        return None

    async def fetch(self, attachment: Attachment, *, limit: int) -> AsyncIterator[bytes]:
        """The bytes of ``attachment`` as they arrive, from the platform's own file endpoint.

        Raises ``MediaTooLargeError`` before reading when the platform declares more than
        ``limit`` bytes (``Attachment.size``, ``Content-Length``); the caller counts what
        arrives and stops past ``limit`` itself. ``MediaUnavailableError`` for anything
        else that goes wrong; its message never carries a token or a signed URL.
        """
        if attachment.data is not None:
            if len(attachment.data) > limit:
                raise MediaTooLargeError("the file is too large", size=len(attachment.data), limit=limit)
            yield attachment.data
            return
        raise MediaUnavailableError(f"{self.platform} cannot download files")

    async def send_approval(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str | None:
        """Show an approval question in ``target``'s chat (thread, reply_to); the id of the message
        that shows it (for ``settle_approval``), or None. Platforms with buttons override this."""
        sent = await self.send(replace(target, text=prompt.typed()))
        return sent.message_ids[0] if sent.message_ids else None

    async def settle_approval(self, target: OutboundMessage, message_id: str, outcome: str) -> None:  # noqa: B027
        """Show the question's outcome in place of its buttons (the question message ``message_id``
        edited to ``outcome``). Default: nothing (the answer itself is visible in the chat)."""

    def split(self, text: str) -> list[str]:
        """Split a reply to the platform's limit; adapters with special units override."""
        from ._split import split_text

        return split_text(text, self.max_message_length)
