"""What the Slack adapter needs to know, already validated by the gateway's config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = ["SlackSettings"]


@dataclass(frozen=True)
class SlackSettings:
    #: Bot token (xoxb-...): every Web API call.
    bot_token: str = field(repr=False)
    #: App-level token (xapp-..., scope connections:write): Socket Mode only.
    app_token: str | None = field(default=None, repr=False)
    #: Signing secret: HTTP (Events API) mode only; requests that do not carry its signature get 401.
    signing_secret: str | None = field(default=None, repr=False)
    mode: Literal["socket", "http"] = "socket"
    #: Web API root; the SDK appends the method name (``chat.postMessage``).
    api_base_url: str = "https://slack.com/api/"
    #: Where Slack posts events on the daemon's own HTTP server (HTTP mode).
    events_path: str = "/slack/events"
    #: Channels (ids) where the bot answers every message, not only mentions.
    free_response_channels: frozenset[str] = frozenset()
    #: Socket Mode: seconds between pings; a socket with no pong for about 1.5 pings is dead.
    ping_interval: float = 10.0
    #: How often the watchdog checks the socket (seconds); 0 = ``ping_interval / 2``.
    watchdog_interval: float = 0.0
    #: 429 answers retried (each after its Retry-After) before a send fails.
    rate_limit_retries: int = 5
    #: Timeout of one Web API call (seconds).
    request_timeout: float = 20.0
    #: Post a placeholder while the agent works and edit the answer into it.
    thinking_placeholder: bool = True
    thinking_text: str = "_…thinking_"
    #: Seconds an answer may take before the placeholder is posted (0 = at once).
    thinking_delay: float = 1.0
