"""``platforms.discord``: the Discord adapter's settings, from config.yaml and ``DISCORD_*``."""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, SecretStr, field_validator, model_validator

from adapters.settings import PlatformSettings, env_name, id_list, reveal

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_GATEWAY_URL", "DiscordSettings"]

DEFAULT_BASE_URL = "https://discord.com/api/v10"
DEFAULT_GATEWAY_URL = "wss://gateway.discord.gg/"


class DiscordSettings(PlatformSettings):
    """``platforms.discord``; every key can also be set as ``DISCORD_<KEY>``."""

    env_prefix: ClassVar[str] = "DISCORD_"
    credential_key: ClassVar[str] = "token"

    token: SecretStr | None = Field(default=None, json_schema_extra=env_name("DISCORD_BOT_TOKEN"))
    """The bot token (Developer Portal: your application -> Bot -> Reset Token)."""
    base_url: str = DEFAULT_BASE_URL
    """REST root: a proxy, or a local emulator in tests. discord.py keeps it process-wide, so one
    process serves one Discord endpoint."""
    gateway_url: str = DEFAULT_GATEWAY_URL
    """Gateway websocket, as ``base_url``; a RESUME goes to the ``resume_gateway_url`` Discord hands out."""
    require_mention: bool = True
    """In server channels answer only when @mentioned or replied to (DMs always get an answer)."""
    free_response_channels: frozenset[str] = frozenset()
    """Channel ids (or thread parents) where every message is for the bot, mention or not."""
    auto_thread: bool = False
    """When mentioned in a channel, carry the conversation on in a thread started from that message."""
    guild_ready_timeout: float = Field(default=2.0, ge=0)
    """How long discord.py waits for the guilds after READY before "ready" (seconds)."""
    heartbeat_timeout: float = Field(default=60.0, gt=0)
    """Nothing at all received for this long: discord.py drops the connection and resumes (seconds)."""
    degraded_after_missed_acks: float = Field(default=2.0, gt=0)
    """Heartbeat intervals without an ACK before health says "degraded"."""
    reconnect_after_missed_acks: float = Field(default=4.0, gt=0)
    """Heartbeat intervals without an ACK before the adapter drops the (zombie) connection and resumes."""
    identify_delay: float = Field(default=5.0, ge=0)
    """Pause before a re-IDENTIFY after a lost session (seconds; Discord limits IDENTIFYs)."""
    catchup_channels: int = Field(default=50, ge=0)
    """After a reconnect, how many recently active channels are read back over REST."""
    catchup_limit: int = Field(default=100, ge=0, le=1000)
    """After a reconnect, at most how many missed messages are read back per channel."""
    max_ratelimit_wait: float = Field(default=300.0, gt=0)
    """Longest 429 wait honoured for one request (seconds); a longer one fails the send."""
    max_upload_mb: float = Field(default=10.0, gt=0)
    """The most the bot uploads in one message (MiB): 10 in a server without boosts (50 at boost level 2, 100 at
    level 3); a larger file gets a note instead."""

    _split = field_validator("free_response_channels", mode="before")(id_list)

    @model_validator(mode="after")
    def _usable(self) -> Self:
        if not self.active:
            return self
        token = reveal(self.token)
        if not token or any(c.isspace() for c in token):
            raise ValueError(
                "Discord is enabled but DISCORD_BOT_TOKEN is missing or malformed: set it to the bot token from "
                "the Discord Developer Portal (your application -> Bot -> Reset Token), or set "
                "platforms.discord.enabled to false"
            )
        if not self.base_url.startswith(("https://", "http://")):
            raise ValueError("platforms.discord.base_url must be an http(s):// URL")
        if not self.gateway_url.startswith(("wss://", "ws://")):
            raise ValueError("platforms.discord.gateway_url must be a ws(s):// URL")
        return self
