"""discord.py's ``Client``, built for the gateway: endpoints, intents, guarded parsers, events out.

- **Endpoints**: ``base_url``/``gateway_url`` are set on discord.py's ``Route.BASE``
  and ``DiscordWebSocket.DEFAULT_GATEWAY`` when a client is made. Both are
  process-wide in discord.py, hence one Discord endpoint per process.
  ``gateway_url`` is used for every IDENTIFY; a RESUME goes to the
  ``resume_gateway_url`` Discord sent in READY (discord.py's rule, which Discord
  requires), so it bypasses a gateway proxy configured here.
- **Malformed events**: one gateway event discord.py cannot parse is logged and
  dropped instead of taking the connection down.
- **Events** go to the ``ClientEvents`` the adapter gives; no mass mentions are
  ever pinged.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import discord
import structlog
import yarl
from discord.gateway import DiscordWebSocket

from ._settings import DiscordSettings

__all__ = ["ClientEvents", "DiscordClient", "make_client"]

log = structlog.get_logger("hermes.discord")


@dataclass(frozen=True)
class ClientEvents:
    """Where a client's gateway events go."""

    #: READY was parsed: a new session (discord.py's ``connect`` event), before the guilds arrive
    connected: Callable[[], None]
    ready: Callable[[], Awaitable[None]]
    resumed: Callable[[], Awaitable[None]]
    disconnected: Callable[[], None]
    message: Callable[[discord.Message], None]
    #: a raw ``INTERACTION_CREATE`` payload (button presses), before discord.py parses it
    interaction: Callable[[Any], None] | None = None


def _guard_parsers(client: discord.Client) -> None:
    """Make one malformed gateway event a logged drop instead of a dead connection.

    discord.py parses each dispatch inside its receive loop; a payload it cannot read (a missing
    key, a wrong type) raises out of ``Client.connect`` and takes the whole connection down.
    ``parsers`` is discord.py's event -> parser table (on the private ``_connection``).
    """
    parsers: dict[str, Any] | None = getattr(getattr(client, "_connection", None), "parsers", None)
    if not isinstance(parsers, dict):  # pragma: no cover - a discord.py without the table: unguarded
        log.warning("discord.parsers_unguarded")
        return
    for event, parse in list(parsers.items()):
        if event in ("READY", "RESUMED"):
            continue  # without these the session is unusable: let discord.py fail and reconnect

        def guarded(data: Any, parse: Any = parse, event: str = event) -> None:
            try:
                parse(data)
            except Exception as exc:
                ident = data.get("id") if isinstance(data, dict) else None
                log.warning("discord.event_malformed", gateway_event=event, id=str(ident)[:32],
                            error=type(exc).__name__)

        parsers[event] = guarded


def _hook_interactions(client: discord.Client, hook: Callable[[Any], None]) -> None:
    """Hand every ``INTERACTION_CREATE`` payload to ``hook`` as it arrives, then to discord.py's own parser.

    The raw payload is all a press needs (its ``custom_id`` says everything), and reading it here
    does not depend on discord.py's ``Interaction`` model accepting it.
    """
    parsers: dict[str, Any] | None = getattr(getattr(client, "_connection", None), "parsers", None)
    if not isinstance(parsers, dict):  # pragma: no cover - a discord.py without the table
        log.warning("discord.interactions_unhooked")
        return
    original = parsers.get("INTERACTION_CREATE")

    def parse(data: Any) -> None:
        try:
            hook(data)
        except Exception as exc:
            log.warning("discord.interaction_failed", error=type(exc).__name__)
        if original is not None:
            original(data)

    parsers["INTERACTION_CREATE"] = parse


class _NoVoiceNoise(logging.Filter):
    """discord.py warns at every start that voice libraries are missing; this gateway has no voice."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "voice will NOT be supported" not in record.getMessage()


logging.getLogger("discord.client").addFilter(_NoVoiceNoise())


class DiscordClient(discord.Client):
    """discord.py's client with its events routed to the adapter's ``ClientEvents``."""

    def __init__(self, settings: DiscordSettings, events: ClientEvents, **options: Any) -> None:
        super().__init__(**options)
        self._settings = settings
        self._events = events

    async def before_identify_hook(self, shard_id: int | None, *, initial: bool = False) -> None:
        # discord.py sleeps 5 s before every re-IDENTIFY; the pause is a setting here.
        if not initial and self._settings.identify_delay > 0:
            await asyncio.sleep(self._settings.identify_delay)

    async def on_connect(self) -> None:
        # Dispatched by discord.py when it parses READY (a new session), before the guilds arrive.
        self._events.connected()

    async def on_ready(self) -> None:
        await self._events.ready()

    async def on_resumed(self) -> None:
        await self._events.resumed()

    async def on_disconnect(self) -> None:
        self._events.disconnected()

    async def on_message(self, message: discord.Message) -> None:
        self._events.message(message)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord.event_failed", event=event_method)


def make_client(settings: DiscordSettings, events: ClientEvents, trace: aiohttp.TraceConfig | None = None) -> DiscordClient:
    """A new client (one per connection), its endpoints set and its parsers guarded; ``trace`` watches
    its REST requests."""
    s = settings
    # Both are read by discord.py each time it builds a request or connects.
    discord.http.Route.BASE = s.base_url.rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(s.gateway_url)
    intents = discord.Intents.default()
    intents.message_content = True
    intents.presences = False
    intents.members = False
    client = DiscordClient(
        settings,
        events,
        intents=intents,
        guild_ready_timeout=s.guild_ready_timeout,
        heartbeat_timeout=s.heartbeat_timeout,
        chunk_guilds_at_startup=False,
        max_ratelimit_timeout=s.max_ratelimit_wait,
        http_trace=trace,
        allowed_mentions=discord.AllowedMentions(everyone=False, roles=False, users=True, replied_user=True),
    )
    _guard_parsers(client)
    if events.interaction is not None:
        _hook_interactions(client, events.interaction)
    return client
