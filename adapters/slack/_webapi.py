"""The bot's Web API client, who the bot is, and where Socket Mode connects.

At start: ``auth.test`` with the bot token (who the bot is, for mention and
self-message filtering) and, in Socket Mode, one ``apps.connections.open`` with
the app token, whose URL the SDK then connects to (it would otherwise ask for
another). A rejected token is a ``FatalAdapterError`` with a clear message; the
SDK alone would retry a bad app token forever.
"""

from __future__ import annotations

from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from ..base import AdapterError, FatalAdapterError
from ..settings import reveal
from ._inbound import BotIdentity
from ._settings import SlackSettings

__all__ = ["api_error", "identify", "make_web_client", "open_socket_url"]

#: Slack's answers to a token it does not accept: retrying cannot help.
_AUTH_ERRORS = frozenset(
    {"invalid_auth", "not_authed", "account_inactive", "token_revoked", "token_expired", "not_allowed_token_type"}
)


def api_error(exc: SlackApiError) -> str:
    """Slack's error code for a failed call (never the request's details)."""
    data = getattr(exc.response, "data", None)
    error = data.get("error") if isinstance(data, dict) else None
    return str(error or f"HTTP {getattr(exc.response, 'status_code', '?')}")


def make_web_client(settings: SlackSettings, session: aiohttp.ClientSession, *, retries: bool = True) -> AsyncWebClient:
    """The bot's client, on ``session``; it waits out 429s (Retry-After), ``rate_limit_retries`` times.

    ``retries=False``: no retry at all, for a streamed answer. Its caller must see a 429 at once (the
    gateway shows nothing until ``retry_after`` and then everything at once), and an append that
    met a dropped connection may have landed: sent again it would show its text twice.
    """
    s = settings
    client = AsyncWebClient(token=reveal(s.bot_token), base_url=s.api_base_url, timeout=int(s.request_timeout),
                            session=session, retry_handlers=None if retries else [])
    if retries:
        client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=s.rate_limit_retries))
    return client


async def identify(client: AsyncWebClient) -> tuple[BotIdentity, dict[str, Any]]:
    """Who the bot is (``auth.test``), and the whole answer (team and enterprise ids)."""
    try:
        resp = await client.auth_test()
    except SlackApiError as exc:
        error = api_error(exc)
        if error in _AUTH_ERRORS:
            raise FatalAdapterError(
                f"Slack rejected the bot token ({error} on auth.test). Check SLACK_BOT_TOKEN: the "
                "xoxb-... 'Bot User OAuth Token' under OAuth & Permissions of your app at api.slack.com/apps."
            ) from None
        raise AdapterError(f"Slack auth.test failed: {error}") from None
    user_id, bot_id = resp.get("user_id"), resp.get("bot_id")
    if not isinstance(user_id, str) or not user_id:
        raise AdapterError("Slack auth.test answered without a user_id")
    data = resp.data if isinstance(resp.data, dict) else {}
    return BotIdentity(user_id=user_id, bot_id=bot_id if isinstance(bot_id, str) else None), data


async def open_socket_url(client: AsyncWebClient, token: str | None) -> str:
    """``apps.connections.open`` with the app token (once: the SDK connects to the URL it gives)."""
    if not token:
        raise FatalAdapterError(
            "Slack Socket Mode needs SLACK_APP_TOKEN: an app-level token (xapp-...) with the "
            "connections:write scope, from Basic Information > App-Level Tokens at api.slack.com/apps "
            "(or set platforms.slack.mode to http)."
        )
    try:
        resp = await client.apps_connections_open(app_token=token)
    except SlackApiError as exc:
        error = api_error(exc)
        if error in _AUTH_ERRORS:
            raise FatalAdapterError(
                f"Slack rejected the app token ({error} on apps.connections.open). Check SLACK_APP_TOKEN: "
                "an app-level token (xapp-...) with connections:write, and that Socket Mode is enabled."
            ) from None
        raise AdapterError(f"Slack apps.connections.open failed: {error}") from None
    url = resp.get("url")
    if not isinstance(url, str) or not url:
        raise AdapterError("Slack apps.connections.open answered without a url")
    return url
