"""``platforms.slack``: the Slack adapter's settings, from config.yaml and ``SLACK_*``."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import Field, SecretStr, field_validator, model_validator

from adapters.settings import PlatformSettings, id_list, reveal

__all__ = ["SlackSettings"]


class SlackSettings(PlatformSettings):
    """``platforms.slack``; every key can also be set as ``SLACK_<KEY>``. Who may chat:
    ``SLACK_ALLOWED_USERS`` (member ids like U012AB3CD), as for every platform."""

    env_prefix: ClassVar[str] = "SLACK_"
    credential_key: ClassVar[str] = "bot_token"

    bot_token: SecretStr | None = None
    """Bot User OAuth Token (``xoxb-...``): every Web API call."""
    app_token: SecretStr | None = None
    """App-level token (``xapp-...``, scope ``connections:write``): Socket Mode only."""
    signing_secret: SecretStr | None = None
    """HTTP mode only: requests that do not carry its signature get 401."""
    mode: Literal["socket", "http"] = "socket"
    """``socket``: Socket Mode, no public URL needed; ``http``: Slack posts events to ``events_path``
    on the daemon's HTTP server (``platforms.api_server.host``/``port``), usually through a TLS proxy."""
    api_base_url: str = "https://slack.com/api/"
    """Web API root; the SDK appends the method name (``chat.postMessage``)."""
    events_path: str = "/slack/events"
    """HTTP mode: where Slack posts events (and slash commands) on the daemon's HTTP server."""
    free_response_channels: frozenset[str] = frozenset()
    """Channel ids where the bot answers every message, not only mentions."""
    ping_interval: float = Field(default=10.0, gt=0)
    """Socket Mode: seconds between pings; a socket with no pong for about 1.5 pings is dead."""
    watchdog_interval: float = Field(default=0.0, ge=0)
    """How often the watchdog checks the socket (seconds); 0: half of ``ping_interval``."""
    rate_limit_retries: int = Field(default=5, ge=0)
    """429 answers retried (each after its Retry-After) before a send fails."""
    request_timeout: float = Field(default=20.0, gt=0)
    """Timeout of one Web API call (seconds)."""
    max_upload_mb: float = Field(default=1024.0, gt=0, le=1024)
    """The largest file the bot uploads (MiB; Slack takes up to 1 GB, a workspace may allow less); a larger
    file gets a note instead."""
    thinking_placeholder: bool = True
    """Post a placeholder while the agent works and edit the answer into it."""
    thinking_text: str = Field(default="_…thinking_", min_length=1)
    """The placeholder's text (mrkdwn)."""
    thinking_delay: float = Field(default=1.0, ge=0)
    """Seconds an answer may take before the placeholder is posted (quicker answers never get one)."""

    _split = field_validator("free_response_channels", mode="before")(id_list)

    @model_validator(mode="after")
    def _usable(self) -> Self:
        if not self.active:
            return self
        if not reveal(self.bot_token).startswith("xoxb-"):
            raise ValueError(
                "Slack is enabled but SLACK_BOT_TOKEN is missing or is not a bot token: set it to the "
                "xoxb-... 'Bot User OAuth Token' from OAuth & Permissions of your app at api.slack.com/apps "
                "(or set platforms.slack.enabled to false)"
            )
        if self.mode == "socket":
            if not reveal(self.app_token).startswith("xapp-"):
                raise ValueError(
                    "Slack Socket Mode requires SLACK_APP_TOKEN: an app-level token (xapp-...) with the "
                    "connections:write scope, from Basic Information > App-Level Tokens at api.slack.com/apps "
                    "(or set platforms.slack.mode to http)"
                )
        else:
            if not reveal(self.signing_secret):
                raise ValueError(
                    "Slack HTTP mode requires SLACK_SIGNING_SECRET, so that forged events are refused: copy "
                    "the 'Signing Secret' from Basic Information > App Credentials of your app at "
                    "api.slack.com/apps into the .env file as SLACK_SIGNING_SECRET=<value>"
                )
            if not self.events_path.startswith("/"):
                raise ValueError("platforms.slack.events_path must start with '/'")
        return self
