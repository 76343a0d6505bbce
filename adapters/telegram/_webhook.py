"""Webhook mode: Telegram posts updates to a route on the daemon's own HTTP server.

``setWebhook`` registers ``webhook_url`` with the secret token; every request
must carry that token (401 without it, 403 with a wrong one) before its body is
read. ``ready`` is set once getMe and setWebhook succeeded. An authenticated
body that is not an update is acknowledged, or Telegram would send it forever.
An update the router deferred (``Disposition.DEFERRED``: storage away, nothing stored or answered)
is answered 503, so Telegram delivers it again (it retries a webhook on any non-2xx answer); so is
a message still with the router when ``dispatch_wait`` ran out (the router waits for a database
connection up to the pool's timeout before it can defer), and Telegram's retry of it joins that
dispatch rather than starting another. An album part has its 200 before its album reaches the
router, so an album is not deferred here.
"""

from __future__ import annotations

import asyncio
import hmac
import json

import structlog
from aiohttp import web

from ..base import Disposition, FatalAdapterError
from ..settings import reveal
from ._client import ALLOWED_UPDATES, BotConnection, TelegramBot
from ._intake import UpdateIntake
from ._settings import WEBHOOK_SECRET_HEADER, TelegramSettings

__all__ = ["Webhook"]

log = structlog.get_logger("hermes.telegram")


class Webhook:
    def __init__(self, settings: TelegramSettings, connection: BotConnection, intake: UpdateIntake,
                 ready: asyncio.Event, stopping: asyncio.Event) -> None:
        self._settings = settings
        self._connection = connection
        self._intake = intake
        self._ready = ready
        self._stopping = stopping

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post(self._settings.webhook_path, self._handle)

    async def serve(self, bot: TelegramBot) -> None:
        """Register the webhook, then serve until the adapter stops."""
        s = self._settings
        if not s.webhook_url or not s.webhook_secret:
            raise FatalAdapterError("webhook mode needs platforms.telegram.webhook_url and TELEGRAM_WEBHOOK_SECRET")
        await bot.set_webhook(
            url=s.webhook_url,
            secret_token=reveal(s.webhook_secret),
            allowed_updates=ALLOWED_UPDATES,
            drop_pending_updates=False,
        )
        self._ready.set()
        log.info("telegram.webhook", bot=self._connection.username, path=s.webhook_path)
        await self._stopping.wait()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        secret = reveal(self._settings.webhook_secret)
        given = request.headers.get(WEBHOOK_SECRET_HEADER)
        if not secret or given is None:
            log.warning("telegram.webhook_rejected", reason="missing secret header", remote=request.remote)
            return web.json_response({"ok": False, "error": "missing secret token"}, status=401)
        if not hmac.compare_digest(given.encode("utf-8", "replace"), secret.encode()):
            log.warning("telegram.webhook_rejected", reason="wrong secret", remote=request.remote)
            return web.json_response({"ok": False, "error": "wrong secret token"}, status=403)
        bot = self._connection.bot
        if bot is None or not self._ready.is_set():
            # Telegram keeps the update and delivers it again later.
            return web.json_response({"ok": False, "error": "not ready"}, status=503)
        try:
            item = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            item = None
        update_id = item.get("update_id") if isinstance(item, dict) else None
        if not isinstance(item, dict) or not isinstance(update_id, int) or isinstance(update_id, bool):
            # Authenticated but unusable: acknowledge it, or Telegram would send it again forever.
            log.warning("telegram.update_malformed", update_id=None, error="webhook body is not an update")
            return web.json_response({"ok": True})
        # Telegram's retry of an update still with the router joins it (a second dispatch would be a
        # duplicate, acknowledged, and lost if the first is then deferred).
        task = self._intake.running(update_id) or self._intake.take(bot, update_id, item)
        if task is None:
            return web.json_response({"ok": True})
        await asyncio.wait({task}, timeout=self._settings.dispatch_wait)
        if not task.done():
            if self._intake.running(update_id) is task:  # a message (not a press): asked for again
                log.info("telegram.webhook_unsettled", update_id=update_id)
                return web.json_response({"ok": False, "error": "still being taken"}, status=503)
        elif not task.cancelled() and task.exception() is None and task.result() is Disposition.DEFERRED:
            self._intake.take_deferred()  # the poll loop's note; here the 503 asks for it again
            return web.json_response({"ok": False, "error": "storage unavailable"}, status=503)
        return web.json_response({"ok": True})
