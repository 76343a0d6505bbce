"""Discord, on discord.py: gateway websocket in, REST out.

``DiscordAdapter(DiscordSettings(token=...))``; the settings model is ``platforms.discord`` of
config.yaml (with ``DISCORD_*`` environment variables), validated by the gateway's config loader.
"""

from typing import TYPE_CHECKING, Any

from ._settings import DiscordSettings

__all__ = ["DiscordAdapter", "DiscordSettings"]

if TYPE_CHECKING:
    from ._adapter import DiscordAdapter


def __getattr__(name: str) -> Any:
    # The adapter imports discord.py; the settings model alone (config validation, every
    # CLI command) must not pay for that.
    if name == "DiscordAdapter":
        from ._adapter import DiscordAdapter

        return DiscordAdapter
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
