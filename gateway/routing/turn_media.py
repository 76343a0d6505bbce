"""A message's attachments taken in for its turn, and what the person is told when that fails."""

from __future__ import annotations

import asyncio

import structlog

from adapters.base import InboundMessage, MediaUnavailableError, OutboundMessage, SendKind
from gateway.errors import BadInputError, GatewayError, describe
from gateway.logs import redact
from gateway.media import TakenMedia
from gateway.routing.services import Services

log = structlog.get_logger("hermes.router")

__all__ = ["take_media"]


async def take_media(services: Services, msg: InboundMessage) -> TakenMedia | None:
    """The message's attachments as the agent reads them; None (the person told why) when they
    cannot be taken at all. A message left with nothing to answer gets its problems as the reply."""
    media = services.media
    try:
        if media is None:
            raise MediaUnavailableError("this gateway was built without media support")
        taken = await media.take(msg, services.adapters.get(msg.platform))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # storage refused (a full disk), or a bug: the person is told
        if isinstance(exc, GatewayError):
            log.warning("router.media_failed", error_type=type(exc).__name__, error=str(exc))
        else:
            log.exception("router.media_failed")
        view = describe(exc)
        await services.delivery.send(OutboundMessage(
            msg.platform, msg.chat_id, redact(view.reply), msg.thread_id, msg.message_id, SendKind.NOTICE,
            error=view.reply_error()))
        return None
    if not taken.answerable:
        said = "\n".join(taken.problems) or "That message had nothing I can read."
        await services.delivery.send(OutboundMessage(
            msg.platform, msg.chat_id, redact(said), msg.thread_id, msg.message_id, SendKind.NOTICE,
            error=describe(BadInputError(said)).reply_error()))
    return taken
