"""What the Discord adapter needs to know, already validated by the gateway's config."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_GATEWAY_URL", "DiscordSettings"]

DEFAULT_BASE_URL = "https://discord.com/api/v10"
DEFAULT_GATEWAY_URL = "wss://gateway.discord.gg/"


@dataclass(frozen=True)
class DiscordSettings:
    token: str = field(repr=False)
    #: REST root and gateway websocket; override for a proxy or a local emulator. discord.py keeps
    #: these process-wide, so one process serves one Discord endpoint (one adapter per daemon).
    base_url: str = DEFAULT_BASE_URL
    gateway_url: str = DEFAULT_GATEWAY_URL
    #: In guild channels answer only when @mentioned or replied to (DMs always get an answer).
    require_mention: bool = True
    #: Channel ids (or thread parents) where every message is for the bot, mention or not.
    free_response_channels: frozenset[str] = frozenset()
    #: When mentioned in a channel, carry the conversation on in a thread started from that message.
    auto_thread: bool = False
    #: How long discord.py waits for the guilds after READY before "ready" (seconds).
    guild_ready_timeout: float = 2.0
    #: Nothing at all received for this long: discord.py drops the connection and resumes.
    heartbeat_timeout: float = 60.0
    #: Heartbeat intervals without an ACK before health says "degraded" ...
    degraded_after_missed_acks: float = 2.0
    #: ... and before the adapter drops the (zombie) connection itself and resumes.
    reconnect_after_missed_acks: float = 4.0
    #: Pause before a re-IDENTIFY after a lost session (discord.py's default; Discord limits IDENTIFYs).
    identify_delay: float = 5.0
    #: After a reconnect, how many recently active channels are read back over REST ...
    catchup_channels: int = 50
    #: ... and at most how many messages per channel (missed messages beyond that are not fetched).
    catchup_limit: int = 100
    #: Longest 429 wait honoured for one request; longer ones fail the send (seconds).
    max_ratelimit_wait: float = 300.0
