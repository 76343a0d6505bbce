"""Which adapters a run has, and which secrets the log redactor must know, from the config."""

from __future__ import annotations

import ipaddress

from adapters.api_server import ApiServerAdapter
from adapters.base import Adapter
from adapters.cli import CliAdapter
from adapters.discord import DiscordAdapter
from adapters.slack import SlackAdapter
from adapters.telegram import TelegramAdapter
from gateway.config import LoadedConfig, mcp_secrets, secret_values
from gateway.errors import ConfigError


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_adapters(config: LoadedConfig, *, standalone: bool, extra: dict[str, Adapter]) -> dict[str, Adapter]:
    """The adapters of this run: the terminal chat always, the rest as config.yaml enables them."""
    adapters: dict[str, Adapter] = {"cli": CliAdapter()}  # the terminal chat, always on
    if standalone:
        return adapters
    api = config.settings.platforms.api_server
    if api.enabled:
        key = api.key.get_secret_value() if api.key else None
        if not _is_loopback(api.host) and not key:
            raise ConfigError(
                f"platforms.api_server.host is {api.host}, which is reachable from other machines; "
                f"set API_SERVER_KEY (or platforms.api_server.key in {config.config_file}) first."
            )
        adapters["api-server"] = ApiServerAdapter(key=key, model_name=config.settings.model.default,
                                                  streaming=api.streaming, max_body_bytes=api.max_request_bytes,
                                                  max_media_bytes=api.max_media_bytes,
                                                  allow_remote_media=api.allow_remote_media)
    telegram = config.settings.platforms.telegram
    if telegram.active:
        adapters["telegram"] = TelegramAdapter(telegram)
    slack = config.settings.platforms.slack
    if slack.active:
        adapters["slack"] = SlackAdapter(slack)
    discord = config.settings.platforms.discord
    if discord.active:
        adapters["discord"] = DiscordAdapter(discord)
    adapters.update(extra)
    # Built once: an adapter choosing among sizes of one file (Telegram's photos) picks within the limit.
    limit = int(config.settings.media.max_download_mb * 2**20)
    for adapter in adapters.values():
        adapter.max_download_bytes = limit
    return adapters


def secrets_of(config: LoadedConfig) -> list[str | None]:
    """Every secret value the config holds, for the log redactor."""
    values: list[str | None] = list(secret_values(config.settings))
    values += [v for k, v in config.env.items() if k.endswith(("_TOKEN", "_KEY", "_SECRET"))]
    # the MCP servers' env and headers, as resolved from ${NAME}: whatever they hold is a secret
    values += mcp_secrets(config.settings.mcp_servers, config.env)
    return values
