"""Discord, on discord.py: gateway websocket in, REST out.

``DiscordAdapter(DiscordSettings(token=...))``; the gateway builds the settings
from ``platforms.discord`` in config.yaml and ``DISCORD_*`` environment variables.
"""

from ._adapter import DiscordAdapter
from ._settings import DiscordSettings

__all__ = ["DiscordAdapter", "DiscordSettings"]
