"""A turn's answer shown while it is written: the stream a platform opens for it, and its end
when the turn is stopped."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog

from adapters.base import InboundMessage, OutboundMessage, SendKind
from gateway.logs import redact
from gateway.routing.outbox import ReplyOutbox
from gateway.routing.services import Services
from gateway.routing.streaming import ChatPacer, StreamDriver, stopped_text

__all__ = ["end_stopped", "open_stream"]

log = structlog.get_logger("hermes.router")


def open_stream(services: Services, pacer: ChatPacer, msg: InboundMessage, outbox: ReplyOutbox | None, *,
                on_shown: Callable[[], object]) -> StreamDriver | None:
    """The driver that shows this turn's answer while it is written; None where the platform
    does not stream (or it is switched off there)."""
    adapter = services.adapters.get(msg.platform)
    if adapter is None or services.delivery.relaying(msg.platform):  # another node sends its answer
        return None
    target = OutboundMessage(msg.platform, msg.chat_id, "", msg.thread_id, msg.message_id)
    try:
        stream = adapter.open_stream(target)
    except Exception:  # the answer still comes, whole
        log.exception("router.stream_open_failed")
        return None
    if stream is None:
        return None
    settings = services.config.settings
    own = getattr(getattr(settings.platforms, msg.platform, None), "tool_progress", None)
    on_ids = None
    if outbox is not None:
        store = services.store

        def on_ids(ids: tuple[str, ...]) -> None:
            # Queued in order on the one writer, ahead of the answer's own transaction.
            write = asyncio.ensure_future(store.write(outbox.stream_op(ids)))
            write.add_done_callback(_log_failed_write)

    return StreamDriver(stream, chat=(msg.platform, msg.chat_id), settings=settings.streaming, pacer=pacer,
                        tool_progress=own if isinstance(own, bool) else settings.streaming.tool_progress,
                        clean=redact, on_ids=on_ids, on_shown=on_shown)


async def end_stopped(stream: StreamDriver, compose: Callable[..., OutboundMessage]) -> None:
    """A stopped turn's stream: what was shown stays, marked as stopped."""
    try:
        if stream.shown:
            await stream.finish(compose(stopped_text(stream.partial), SendKind.NOTICE))
        else:
            await stream.close()
    except Exception:
        log.exception("router.stopped_stream_failed")


def _log_failed_write(write: asyncio.Future[None]) -> None:
    if not write.cancelled() and write.exception() is not None:
        # The stream goes on; only a crash now would leave its messages unaccounted for.
        log.warning("router.stream_ledger_failed", error=str(write.exception()))
