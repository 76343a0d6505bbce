"""Discord, on discord.py: gateway websocket in, REST out.

``DiscordAdapter(DiscordSettings(token=...))``; the settings model is ``platforms.discord`` of
config.yaml (with ``DISCORD_*`` environment variables), validated by the gateway's config loader.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

from ._settings import DiscordSettings

__all__ = ["DiscordAdapter", "DiscordSettings"]

if TYPE_CHECKING:
    from ._adapter import DiscordAdapter

# The adapter imports discord.py; the settings model alone (config validation, every CLI command)
# must not pay for that.
__getattr__ = lazy_names(__name__, {"DiscordAdapter": "adapters.discord._adapter"})
