"""The adapters' errors: ``AdapterError`` and its children, under the one root ``GatewayError``
(``gateway/errors.py`` draws the whole tree). ``adapters.base`` exports them with the protocol."""

from __future__ import annotations

from storage.errors import GatewayError

__all__ = [
    "AdapterError",
    "ChatGoneError",
    "FatalAdapterError",
    "MalformedUpdateError",
    "MediaError",
    "MediaTooLargeError",
    "MediaUnavailableError",
    "RateLimitedError",
]


class AdapterError(GatewayError):
    """A platform, or the connection to it, failed; the root of every adapter's errors.

    Raised out of ``connect`` it makes the runner restart the adapter; out of
    ``send`` it makes the delivery ledger record the reply as failed, with this
    message as the reason.
    """


class FatalAdapterError(AdapterError):
    """Retrying cannot help (bad token, missing intent): the runner does not restart the adapter."""


class RateLimitedError(AdapterError):
    """The platform refused a call for now (HTTP 429) and said for how long.

    Raised by ``ReplyStream.update``: the gateway shows nothing more until
    ``retry_after`` has passed, then shows everything written meanwhile at once.
    """

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(0.0, retry_after)


class MediaError(AdapterError):
    """An attachment's bytes could not be had; the message says why, for a person to read."""


class MediaTooLargeError(MediaError):
    """An attachment is larger than the gateway takes (declared, or counted while it arrived)."""

    def __init__(self, message: str, *, size: int | None, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


class MediaUnavailableError(MediaError):
    """The platform would not hand an attachment over (gone, expired, refused, a dropped download)."""


class MalformedUpdateError(AdapterError, ValueError):
    """A platform update that parses but carries fields of the wrong type.

    Also a ``ValueError``, like the errors the platform libraries raise for a field
    they cannot parse: a caller of an inbound translation catches both kinds as one.
    """


class ChatGoneError(AdapterError, ConnectionError):
    """The terminal that owned this chat has disconnected.

    Also a ``ConnectionError``: the control socket treats it as one of its
    connection's failures (and ``ChatSink.push_event`` promises that type).
    """
