"""Slack events and slash commands to the router; slash commands through slack-bolt's ``AsyncApp``.

An event (``event_callback``) comes from its transport (``_http``, ``_socket``) to
``deliver_event``, which converts it and schedules its dispatch, per chat in arrival order,
and says whether the delivery may be acknowledged: once the router has taken it, not when it
deferred it or is still at it after ``ACK_WAIT`` (``_deliveries``: Slack's retries join or
redispatch it; a repeated ``event_id`` is not run twice). Bolt is not in that path: it would
acknowledge the event before our listener runs, and in Socket Mode it drops the envelope's
``retry_attempt``. The router's persistent dedupe on ``<channel>:<ts>`` absorbs the rest (a
redelivery minutes later, or the ``message`` + ``app_mention`` pair of one post).

Slash commands go through Bolt, acknowledged before any work (its default
``process_before_response=False``): Slack never retries a slash command (a late ack only shows
the person an error), so a command that meets storage away gets the router's notice. Bolt is
given the bot's identity from the start-up ``auth.test`` (its ``authorize`` hook), so no Web API
call (and no 429 wait of a retry handler) stands between a command and its ack; Bolt's own
client has no 429 retry handler.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from typing import Any

import aiohttp
import structlog
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.web.async_client import AsyncWebClient

from .._dispatch import ChatOrderedDispatch
from ..base import Disposition, InboundMessage, MessageHandler
from ..settings import reveal
from ._approvals import ACTION_PREFIX, action_to_inbound
from ._deliveries import EventDeliveries, retry_number
from ._inbound import PLATFORM, BotIdentity, command_to_inbound, to_inbound
from ._settings import SlackSettings

__all__ = ["EventIntake"]

log = structlog.get_logger("hermes.slack")


class EventIntake:
    def __init__(self, settings: SlackSettings, dispatch: MessageHandler, *,
                 in_bot_thread: Callable[[str, str], bool], accepted: Callable[[InboundMessage], None]) -> None:
        """``in_bot_thread(channel, thread_ts)``: the bot has posted in that thread;
        ``accepted(message)``: a turn will answer ``message`` (time for a "thinking" placeholder)."""
        self._settings = settings
        self._in_bot_thread = in_bot_thread
        self._accepted = accepted
        self._dispatches = ChatOrderedDispatch(PLATFORM, dispatch, after=self._after_dispatch)
        self._events = EventDeliveries(self._dispatches.schedule)
        self._me: BotIdentity | None = None

    @property
    def pending(self) -> set[asyncio.Task[Disposition | None]]:
        """Messages on their way to the router."""
        return set(self._dispatches.pending) | set(self._events.pending)

    def make_app(self, me: BotIdentity, team_id: str | None, enterprise_id: str | None,
                 session: aiohttp.ClientSession | None) -> AsyncApp:
        """Bolt's app for one connection, its listeners feeding this intake."""
        s = self._settings
        http = s.mode == "http"
        self._me = me

        async def authorize(enterprise_id: str | None, team_id: str | None, user_id: str | None) -> AuthorizeResult:
            # What Bolt's single-team authorization would build from its own lazy auth.test, from ours.
            return AuthorizeResult(enterprise_id=known_enterprise or enterprise_id, team_id=known_team or team_id,
                                   bot_user_id=me.user_id, bot_id=me.bot_id, bot_token=reveal(s.bot_token), user_id=user_id)

        known_team, known_enterprise = team_id, enterprise_id
        # Bolt's client: no token (the authorize result gives each request its own) and not our 429
        # retry handler, so nothing Bolt does can wait out a Retry-After.
        bolt_client = AsyncWebClient(base_url=s.api_base_url, timeout=int(s.request_timeout), session=session)
        app = AsyncApp(
            client=bolt_client,
            authorize=authorize,
            signing_secret=reveal(s.signing_secret),
            request_verification_enabled=http,
            process_before_response=False,
            logger=logging.getLogger("hermes.slack.bolt"),
        )

        @app.command(re.compile(".*"))
        async def on_command(ack: Any, body: dict[str, Any]) -> None:
            await ack()  # the answer comes as a message, like every other answer
            message = command_to_inbound(body)
            if message is not None:
                self._dispatches.schedule(message)

        return app

    async def deliver_event(self, body: Any, retry: object = 0) -> bool:
        """One delivery of an ``event_callback`` body (``retry``: Slack's retry number, 0 for the
        first): dispatched (or joined, see ``_deliveries``); whether it may be acknowledged now."""
        event_id = body.get("event_id") if isinstance(body, dict) else None
        event_id = event_id if isinstance(event_id, str) and event_id else None
        task = self._events.take(event_id, retry_number(retry), lambda: self._convert(body, event_id))
        return await self._events.settled(task, event_id)

    def _convert(self, body: Any, event_id: str | None) -> InboundMessage | None:
        me = self._me
        if me is None or not isinstance(body, dict):
            return None  # pragma: no cover - a transport takes events only once connected
        try:
            return to_inbound(
                body.get("event"),
                me,
                free_response=self._settings.free_response_channels,
                in_bot_thread=self._in_bot_thread,
            )
        except Exception as exc:
            # Never the payload: it is a user's message.
            log.warning("slack.event_malformed", event_id=event_id, error=type(exc).__name__)
            return None

    def take_interactive(self, payload: Any) -> None:
        """An ``interactive`` payload its transport has acknowledged already: a press of one of our
        approval buttons goes to the router, in order with its chat's messages; anything else is dropped."""
        try:
            message = action_to_inbound(payload)
        except Exception as exc:  # an odd payload costs this press only
            log.warning("slack.interaction_malformed", error=type(exc).__name__)
            return
        if message is None:
            kind = payload.get("type") if isinstance(payload, dict) else None
            log.info("slack.interaction_ignored", payload_type=str(kind)[:40])
            return
        self._dispatches.schedule(message)

    def _after_dispatch(self, message: InboundMessage, disposition: Disposition) -> None:
        if message.dedupe_id is not None and message.dedupe_id.startswith(ACTION_PREFIX):
            return  # a press: the settled question answers it, a "thinking" placeholder never would
        if disposition is Disposition.ACCEPTED and self._settings.thinking_placeholder:
            self._accepted(message)
