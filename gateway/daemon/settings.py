"""From the validated config to the settings objects of the parts the daemon builds."""

from __future__ import annotations

from adapters.discord import DiscordSettings
from adapters.slack import SlackSettings
from adapters.telegram import TelegramSettings
from core import AgentSettings
from core.llm import ModelSettings
from core.tools import ToolsetPolicy
from gateway.config.models import DiscordConfig, LoadedConfig, SlackConfig, TelegramConfig
from gateway.errors import ConfigError
from gateway.routing.session_key import SessionKeySettings
from storage import WriterSettings


def key_settings(config: LoadedConfig) -> SessionKeySettings:
    """The chat -> session key rules: the router, /handoff, the control socket and the terminal chat use these."""
    g = config.settings.gateway
    return SessionKeySettings(
        group_sessions_per_user=g.group_sessions_per_user,
        thread_sessions_per_user=g.thread_sessions_per_user,
    )


def writer_settings(config: LoadedConfig) -> WriterSettings:
    s = config.settings.storage
    return WriterSettings(
        batch_limit=s.batch_limit,
        queue_limit=s.queue_limit,
        checkpoint_every_commits=s.checkpoint_every_commits,
        checkpoint_every_seconds=s.checkpoint_every_seconds,
        busy_retry_budget=s.busy_retry_budget,
        synchronous=s.synchronous,
    )


def model_settings(config: LoadedConfig) -> ModelSettings:
    m = config.settings.model
    return ModelSettings(
        base_url=m.base_url,
        api_key=m.api_key.get_secret_value() if m.api_key else None,
        model=m.default,
        auxiliary_model=m.auxiliary,
        timeout=m.timeout,
        max_retries=m.max_retries,
        max_retry_after=m.max_retry_after,
    )


def telegram_settings(tg: TelegramConfig) -> TelegramSettings:
    """The adapter's settings from ``platforms.telegram`` (already validated by the config)."""
    if tg.token is None:  # pragma: no cover - TelegramConfig refuses an active section without one
        raise ConfigError("platforms.telegram is enabled but TELEGRAM_BOT_TOKEN is not set")
    return TelegramSettings(
        token=tg.token.get_secret_value().strip(),
        base_url=tg.base_url,
        base_file_url=tg.base_file_url,
        mode=tg.mode,
        webhook_url=tg.webhook_url,
        webhook_path=tg.webhook_path,
        webhook_secret=tg.webhook_secret.get_secret_value() if tg.webhook_secret else None,
        require_mention=tg.require_mention,
        poll_timeout=tg.poll_timeout,
        watchdog_grace=tg.watchdog_grace,
        conflict_retries=tg.conflict_retries,
        conflict_backoff=tg.conflict_backoff,
        max_flood_wait=tg.max_flood_wait,
    )


def slack_settings(sl: SlackConfig) -> SlackSettings:
    """The adapter's settings from ``platforms.slack`` (already validated by the config)."""
    if sl.bot_token is None:  # pragma: no cover - SlackConfig refuses an active section without one
        raise ConfigError("platforms.slack is enabled but SLACK_BOT_TOKEN is not set")
    return SlackSettings(
        bot_token=sl.bot_token.get_secret_value().strip(),
        app_token=sl.app_token.get_secret_value().strip() if sl.app_token else None,
        signing_secret=sl.signing_secret.get_secret_value().strip() if sl.signing_secret else None,
        mode=sl.mode,
        api_base_url=sl.api_base_url,
        events_path=sl.events_path,
        free_response_channels=frozenset(sl.free_response_channels),
        ping_interval=sl.ping_interval,
        rate_limit_retries=sl.rate_limit_retries,
        thinking_placeholder=sl.thinking_placeholder,
        thinking_delay=sl.thinking_delay,
    )


def agent_settings(config: LoadedConfig) -> AgentSettings:
    a = config.settings.agent
    return AgentSettings(
        max_iterations=a.max_iterations,
        context_length=config.settings.model.context_length,
        compression_threshold=a.compression_threshold,
        tail_tokens=a.tail_tokens,
        memory_nudge_interval=a.memory_nudge_interval,
        skill_nudge_interval=a.skill_nudge_interval,
        review_max_iterations=a.review_max_iterations,
        auto_title=a.auto_title,
        toolsets={
            platform: ToolsetPolicy(frozenset(t.enabled) if t.enabled is not None else None, frozenset(t.disabled))
            for platform, t in a.toolsets.items()
        },
    )


def discord_settings(dc: DiscordConfig) -> DiscordSettings:
    """The adapter's settings from ``platforms.discord`` (already validated by the config)."""
    if dc.token is None:  # pragma: no cover - DiscordConfig refuses an active section without one
        raise ConfigError("platforms.discord is enabled but DISCORD_BOT_TOKEN is not set")
    return DiscordSettings(
        token=dc.token.get_secret_value().strip(),
        base_url=dc.base_url,
        gateway_url=dc.gateway_url,
        require_mention=dc.require_mention,
        free_response_channels=frozenset(dc.free_response_channels),
        auto_thread=dc.auto_thread,
        guild_ready_timeout=dc.guild_ready_timeout,
        heartbeat_timeout=dc.heartbeat_timeout,
        identify_delay=dc.identify_delay,
        catchup_limit=dc.catchup_limit,
    )
