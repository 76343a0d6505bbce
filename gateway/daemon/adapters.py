"""Which adapters a run has, and which secrets the log redactor must know, from the config."""

from __future__ import annotations

import ipaddress

from adapters.api_server import ApiServerAdapter
from adapters.base import Adapter
from adapters.cli import CliAdapter
from adapters.discord import DiscordAdapter
from adapters.slack import SlackAdapter
from adapters.telegram import TelegramAdapter
from gateway.config.models import LoadedConfig
from gateway.daemon.settings import discord_settings, slack_settings, telegram_settings
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
        adapters["api-server"] = ApiServerAdapter(
            key=key, model_name=config.settings.model.default or "hermes-gateway"
        )
    telegram = config.settings.platforms.telegram
    if telegram.active:
        adapters["telegram"] = TelegramAdapter(telegram_settings(telegram))
    slack = config.settings.platforms.slack
    if slack.active:
        adapters["slack"] = SlackAdapter(slack_settings(slack))
    discord = config.settings.platforms.discord
    if discord.active:
        adapters["discord"] = DiscordAdapter(discord_settings(discord))
    adapters.update(extra)
    return adapters

def secrets_of(config: LoadedConfig) -> list[str | None]:
    """Every secret value the config holds, for the log redactor."""
    s = config.settings
    tg = s.platforms.telegram
    values: list[str | None] = [
        s.model.api_key.get_secret_value() if s.model.api_key else None,
        s.platforms.api_server.key.get_secret_value() if s.platforms.api_server.key else None,
        tg.token.get_secret_value() if tg.token else None,
        tg.webhook_secret.get_secret_value() if tg.webhook_secret else None,
    ]
    sl = s.platforms.slack
    values += [v.get_secret_value() for v in (sl.bot_token, sl.app_token, sl.signing_secret) if v]
    dc = s.platforms.discord
    values += [dc.token.get_secret_value()] if dc.token else []
    values += [v for k, v in config.env.items() if k.endswith(("_TOKEN", "_KEY", "_SECRET"))]
    return values
