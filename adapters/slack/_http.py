"""HTTP mode: the Events API route on the daemon's own aiohttp server.

The request signature is checked (slack_sdk's ``SignatureVerifier``) before
anything is parsed: a missing, wrong or stale (> 5 min) one is 401 and nothing
is dispatched. A signed request that Bolt cannot take is acknowledged (200) and
logged, or Slack would send it again and again. Interactive payloads (a form
field ``payload``: button presses; the app's Interactivity Request URL is this
same path) never reach Bolt: they are handed to ``interactive`` and answered 200.

An event (``event_callback``) never reaches Bolt either: it goes to ``events`` with its
``X-Slack-Retry-Num``, and the answer waits for the router (``ACK_WAIT`` at most, below Slack's
3 s): 200 once the router has taken it, 503 when the router deferred it (storage away) or still
has it, so that Slack retries it (its retry joins a dispatch still running). Slash commands
(through Bolt) and interactive payloads are answered 200 at once: Slack never retries them, and a
command's ack must come within 3 s whatever the router does; storage away, the router's notice
answers them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import structlog
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.signature import SignatureVerifier

from ..settings import reveal
from ._inbound import command_well_formed, well_formed
from ._settings import SlackSettings

__all__ = ["EventsEndpoint"]

log = structlog.get_logger("hermes.slack")


def _signed(verifier: SignatureVerifier | None, body: bytes, stamp: str, signature: str) -> bool:
    """Slack's request signature (v0), checked on the raw body before anything is parsed.

    The SDK refuses a timestamp more than five minutes from now (a captured request
    cannot be replayed). What it cannot take is refused here first: its ``int()`` would
    accept " 12" or "+12", its ``compare_digest`` raises on a non-ASCII signature, and it
    checks only UTF-8 bodies (Slack sends nothing else).
    """
    if verifier is None or not (stamp.isascii() and stamp.isdigit()) or not signature.isascii():
        return False
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return verifier.is_valid(text, stamp, signature)


class EventsEndpoint:
    def __init__(self, settings: SlackSettings, app: Callable[[], AsyncApp | None], ready: asyncio.Event,
                 interactive: Callable[[Any], None], events: Callable[[Any, object], Awaitable[bool]]) -> None:
        """``app()`` is the current connection's Bolt app (None before the first connect);
        ``interactive(payload)`` takes an interactive payload (the 200 follows at once);
        ``events(body, retry_num)`` takes an event and says whether it may be acknowledged."""
        self._settings = settings
        self._interactive = interactive
        self._events = events
        self._app = app
        self._ready = ready
        secret = reveal(settings.signing_secret)
        self._verifier = SignatureVerifier(secret) if secret and secret.strip() else None

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post(self._settings.events_path, self._handle)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if not _signed(self._verifier, raw, request.headers.get("X-Slack-Request-Timestamp", ""),
                       request.headers.get("X-Slack-Signature", "")):
            log.warning("slack.request_rejected", reason="bad, stale or missing signature", remote=request.remote)
            return web.json_response({"error": "invalid request"}, status=401)
        bolt = self._app()
        if bolt is None or not self._ready.is_set():
            return web.json_response({"error": "not ready"}, status=503)  # Slack retries it later
        try:
            body = raw.decode("utf-8")
            if request.content_type == "application/json":
                parsed = json.loads(body)
                usable = well_formed(parsed)
                if usable and parsed.get("type") == "event_callback":
                    if await self._events(parsed, request.headers.get("X-Slack-Retry-Num", "0")):
                        return web.Response(status=200)
                    return web.json_response({"error": "not stored yet"}, status=503)  # Slack retries it
            else:  # slash commands and interactive payloads are form posts
                form = dict(parse_qsl(body, keep_blank_values=True))
                if "payload" in form:
                    # The 200 is the acknowledgement Slack waits 3 s for; the router is not waited for.
                    self._interactive(json.loads(form["payload"]))
                    return web.Response(status=200)
                usable = command_well_formed(form)
        except ValueError:  # UnicodeDecodeError included
            usable = False
        if not usable:
            # Signed, so from Slack, but unusable: acknowledge it, or Slack sends it again and again.
            log.warning("slack.event_malformed", event_id=None)
            return web.Response(status=200)
        try:
            bolt_request = AsyncBoltRequest(body=body, query=request.query_string, headers=dict(request.headers))
            response = await bolt.async_dispatch(bolt_request)
        except Exception as exc:
            log.warning("slack.event_malformed", event_id=None, error=type(exc).__name__)
            return web.Response(status=200)
        if response.status >= 404 and response.status != 429:
            # Bolt could not take a signed event (odd shape): a retry gets the same answer.
            log.warning("slack.event_dropped", status=response.status)
            return web.Response(status=200)
        headers = {k: v for k, v in response.first_headers_without_set_cookie().items() if k.lower() != "content-length"}
        return web.Response(status=response.status, body=response.body, headers=headers)
