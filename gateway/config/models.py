"""Configuration: ``$HERMES_HOME/config.yaml`` + ``.env`` + the environment.

Precedence: environment variables > ``.env`` > ``config.yaml`` > defaults.
Validated at start; an unknown or invalid key refuses to start (exit 78)
with the key and the file named. Secrets are ``SecretStr`` and never printed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _id_list(value: Any) -> Any:
    """Accept "a,b c" strings as well as YAML lists; ids are strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.replace(",", " ").split() if v]
    if isinstance(value, bool):
        raise ValueError("expected user ids, not true/false")
    if isinstance(value, int):
        return [str(value)]
    if isinstance(value, list):
        if any(isinstance(v, bool) for v in value):
            raise ValueError("expected user ids, not true/false")
        return [str(v) for v in value]
    return value


class ModelConfig(_Section):
    base_url: str | None = None
    api_key: SecretStr | None = None
    default: str | None = None
    auxiliary: str | None = None
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    # a provider's Retry-After up to this many seconds is waited out; a longer one fails the turn at once
    max_retry_after: float = Field(default=90.0, ge=0)
    # the main model's context window in tokens (compression starts at agent.compression_threshold of it)
    context_length: int = Field(default=128_000, ge=1024)


class SessionResetConfig(_Section):
    mode: Literal["none", "idle", "daily", "both"] = "none"
    idle_minutes: int = Field(default=1440, ge=1)
    at_hour: int = Field(default=4, ge=0, le=23)


class SessionsConfig(_Section):
    auto_prune: bool = False
    retention_days: float = Field(default=90, gt=0)
    vacuum_after_prune: bool = True
    min_interval_hours: float = Field(default=24, ge=0)
    #: /resume may pick up sessions of other users and chats (off: each chat sees only its own)
    allow_cross_user_resume: bool = False
    #: how long a /handoff may wait to be picked up (claimed) before it is failed; once
    #: claimed it runs to completion or to its own failure (thread, send, the agent's turn)
    handoff_timeout_seconds: float = Field(default=300.0, gt=0)


class StorageConfig(_Section):
    checkpoint_every_commits: int = Field(default=50, ge=1)
    checkpoint_every_seconds: float = Field(default=30.0, gt=0)
    batch_limit: int = Field(default=512, ge=1)
    queue_limit: int = Field(default=10_000, ge=1)
    busy_retry_budget: float = Field(default=15.0, gt=0)
    synchronous: Literal["FULL", "NORMAL"] = "FULL"


class AuthConfig(_Section):
    allowed_users: list[str] = Field(default_factory=list)
    allow_all_users: bool = False

    _split = field_validator("allowed_users", mode="before")(_id_list)


class ApiServerConfig(_Section):
    enabled: bool = True
    host: str = "127.0.0.1"
    port: int = Field(default=8642, ge=0, le=65535)
    key: SecretStr | None = None


# Telegram's own rule for a webhook secret, plus a floor against guessable ones.
_WEBHOOK_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{16,256}")
_TELEGRAM_TOKEN_RE = re.compile(r"[0-9]+:[A-Za-z0-9_-]+")
MAKE_SECRET = 'python3 -c "import secrets; print(secrets.token_urlsafe(32))"'


class TelegramConfig(_Section):
    """``platforms.telegram``. On when ``enabled: true``, or when ``enabled`` is not
    set and a bot token is configured (``TELEGRAM_BOT_TOKEN``); ``enabled: false``
    keeps it off even with a token."""

    enabled: bool | None = None
    token: SecretStr | None = None  # TELEGRAM_BOT_TOKEN
    # The Bot API root (PTB appends the token); point it at a self-hosted Bot API server or a fake.
    base_url: str = "https://api.telegram.org/bot"
    base_file_url: str = "https://api.telegram.org/file/bot"
    mode: Literal["polling", "webhook"] = "polling"
    # Webhook mode: Telegram posts to webhook_url, which must reach webhook_path on the
    # daemon's own HTTP server (platforms.api_server.host/port), usually via a TLS proxy.
    webhook_url: str | None = None
    webhook_path: str = "/telegram/webhook"
    webhook_secret: SecretStr | None = None  # TELEGRAM_WEBHOOK_SECRET
    require_mention: bool = True
    poll_timeout: int = Field(default=25, ge=1, le=300)
    watchdog_grace: float = Field(default=15.0, gt=0)
    conflict_retries: int = Field(default=8, ge=0)
    conflict_backoff: float = Field(default=1.0, gt=0)
    max_flood_wait: float = Field(default=900.0, gt=0)

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.token is not None

    @model_validator(mode="after")
    def _usable(self) -> Self:
        if not self.active:
            return self
        token = self.token.get_secret_value().strip() if self.token else ""
        if not token:
            raise ValueError(
                "Telegram is enabled but has no bot token: set TELEGRAM_BOT_TOKEN to the token from "
                "@BotFather (or set platforms.telegram.enabled to false)"
            )
        if not _TELEGRAM_TOKEN_RE.fullmatch(token):
            raise ValueError("TELEGRAM_BOT_TOKEN does not look like a bot token (<digits>:<letters>, from @BotFather)")
        if self.mode == "webhook":
            secret = self.webhook_secret.get_secret_value() if self.webhook_secret else ""
            if not secret:
                raise ValueError(
                    "Telegram webhook mode requires TELEGRAM_WEBHOOK_SECRET, so that forged updates are "
                    f"refused. Make one with: {MAKE_SECRET} and put it in the .env file as "
                    "TELEGRAM_WEBHOOK_SECRET=<value>"
                )
            if not _WEBHOOK_SECRET_RE.fullmatch(secret):
                raise ValueError(
                    "TELEGRAM_WEBHOOK_SECRET must be 16 to 256 characters from A-Z, a-z, 0-9, _ and - "
                    f"(Telegram's rule, with a minimum length). Make one with: {MAKE_SECRET}"
                )
            if not self.webhook_url or not self.webhook_url.startswith(("https://", "http://")):
                raise ValueError(
                    "Telegram webhook mode requires platforms.telegram.webhook_url (or TELEGRAM_WEBHOOK_URL): "
                    "the public https:// URL that reaches webhook_path on this daemon"
                )
            if not self.webhook_path.startswith("/"):
                raise ValueError("platforms.telegram.webhook_path must start with '/'")
        return self


class SlackConfig(_Section):
    """``platforms.slack``. On when ``enabled: true``, or when ``enabled`` is not set and a
    bot token is configured (``SLACK_BOT_TOKEN``). Who may chat: ``SLACK_ALLOWED_USERS``
    (member ids like U012AB3CD), as for every platform."""

    enabled: bool | None = None
    bot_token: SecretStr | None = None  # SLACK_BOT_TOKEN (xoxb-...)
    app_token: SecretStr | None = None  # SLACK_APP_TOKEN (xapp-...), Socket Mode
    signing_secret: SecretStr | None = None  # SLACK_SIGNING_SECRET, HTTP mode
    # socket: Socket Mode (no public URL needed); http: Slack posts events to events_path
    # on the daemon's own HTTP server (platforms.api_server.host/port), usually via a TLS proxy.
    mode: Literal["socket", "http"] = "socket"
    api_base_url: str = "https://slack.com/api/"
    events_path: str = "/slack/events"
    # channel ids where every message is answered, not only mentions
    free_response_channels: list[str] = Field(default_factory=list)
    ping_interval: float = Field(default=10.0, gt=0)
    rate_limit_retries: int = Field(default=5, ge=0)
    thinking_placeholder: bool = True
    # seconds before the placeholder is posted; quicker answers never get one
    thinking_delay: float = Field(default=1.0, ge=0)

    _split = field_validator("free_response_channels", mode="before")(_id_list)

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.bot_token is not None

    @model_validator(mode="after")
    def _usable(self) -> Self:
        if not self.active:
            return self
        token = self.bot_token.get_secret_value().strip() if self.bot_token else ""
        if not token.startswith("xoxb-"):
            raise ValueError(
                "Slack is enabled but SLACK_BOT_TOKEN is missing or is not a bot token: set it to the "
                "xoxb-... 'Bot User OAuth Token' from OAuth & Permissions of your app at api.slack.com/apps "
                "(or set platforms.slack.enabled to false)"
            )
        if self.mode == "socket":
            app = self.app_token.get_secret_value().strip() if self.app_token else ""
            if not app.startswith("xapp-"):
                raise ValueError(
                    "Slack Socket Mode requires SLACK_APP_TOKEN: an app-level token (xapp-...) with the "
                    "connections:write scope, from Basic Information > App-Level Tokens at api.slack.com/apps "
                    "(or set platforms.slack.mode to http)"
                )
        else:
            secret = self.signing_secret.get_secret_value().strip() if self.signing_secret else ""
            if not secret:
                raise ValueError(
                    "Slack HTTP mode requires SLACK_SIGNING_SECRET, so that forged events are refused: copy "
                    "the 'Signing Secret' from Basic Information > App Credentials of your app at "
                    "api.slack.com/apps into the .env file as SLACK_SIGNING_SECRET=<value>"
                )
            if not self.events_path.startswith("/"):
                raise ValueError("platforms.slack.events_path must start with '/'")
        return self


class DiscordConfig(_Section):
    """``platforms.discord``. On when ``enabled: true``, or when ``enabled`` is not set
    and a bot token is configured (``DISCORD_BOT_TOKEN``)."""

    enabled: bool | None = None
    token: SecretStr | None = None  # DISCORD_BOT_TOKEN
    # REST root and gateway websocket: a proxy, or a local emulator in tests.
    base_url: str = "https://discord.com/api/v10"
    gateway_url: str = "wss://gateway.discord.gg/"
    require_mention: bool = True
    free_response_channels: list[str] = Field(default_factory=list)
    auto_thread: bool = False
    guild_ready_timeout: float = Field(default=2.0, ge=0)
    heartbeat_timeout: float = Field(default=60.0, gt=0)
    identify_delay: float = Field(default=5.0, ge=0)
    catchup_limit: int = Field(default=100, ge=0, le=1000)

    _split = field_validator("free_response_channels", mode="before")(_id_list)

    @property
    def active(self) -> bool:
        return self.enabled if self.enabled is not None else self.token is not None

    @model_validator(mode="after")
    def _usable(self) -> Self:
        if not self.active:
            return self
        token = self.token.get_secret_value().strip() if self.token else ""
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


class PlatformsConfig(_Section):
    api_server: ApiServerConfig = Field(default_factory=ApiServerConfig)
    telegram: TelegramConfig = Field(default_factory=TelegramConfig)
    slack: SlackConfig = Field(default_factory=SlackConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)


class GatewayConfig(_Section):
    max_concurrent_turns: int = Field(default=16, ge=1)
    max_queued_per_session: int = Field(default=100, ge=1)
    drain_timeout: float = Field(default=20.0, ge=0)
    #: at shutdown, all adapters disconnect together within this bound (part of TimeoutStopSec)
    disconnect_timeout: float = Field(default=10.0, gt=0)
    group_sessions_per_user: bool = True
    thread_sessions_per_user: bool = False
    dedupe_retention_hours: float = Field(default=72.0, gt=0)
    delivery_recovery_minutes: float = Field(default=60.0, ge=0)
    sweep_interval_seconds: float = Field(default=300.0, gt=0)
    busy_ack: bool = True
    #: the typing indicator starts once a turn has run this long (a quicker answer needs
    #: none, and each indicator is one more platform API call), then repeats every
    #: typing_interval seconds until the answer is sent
    typing_delay: float = Field(default=0.5, ge=0)
    typing_interval: float = Field(default=4.0, gt=0)


class LoggingConfig(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "pretty"] = "auto"


class ToolsetsConfig(_Section):
    # None = every toolset; names listed in disabled are removed either way
    enabled: list[str] | None = None
    disabled: list[str] = Field(default_factory=list)


class AgentConfig(_Section):
    max_iterations: int = Field(default=20, ge=1, le=200)
    compression_threshold: float = Field(default=0.5, gt=0, le=1)
    tail_tokens: int = Field(default=20_000, ge=0)
    # 0 turns a nudge off
    memory_nudge_interval: int = Field(default=10, ge=0)
    skill_nudge_interval: int = Field(default=10, ge=0)
    review_max_iterations: int = Field(default=8, ge=1, le=50)
    auto_title: bool = True
    # platform name (telegram, api-server, slack, ...) -> toolsets it may use
    toolsets: dict[str, ToolsetsConfig] = Field(default_factory=dict)


class Settings(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    session_reset: SessionResetConfig = Field(default_factory=SessionResetConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    platforms: PlatformsConfig = Field(default_factory=PlatformsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)


@dataclass(frozen=True)
class LoadedConfig:
    home: Path
    settings: Settings
    # .env merged under the process environment; holds secrets, so never shown
    env: Mapping[str, str] = field(repr=False)
    config_file: Path

    @property
    def db_path(self) -> Path:
        return self.home / "state.db"

    def platform_allowlist(self, platform: str) -> tuple[frozenset[str], bool]:
        """(allowed ids, allow-all) for a platform, from env and config."""
        prefix = platform.upper().replace("-", "_")
        ids = set(self.settings.auth.allowed_users)
        for key in (f"{prefix}_ALLOWED_USERS", "GATEWAY_ALLOWED_USERS"):
            ids.update(_id_list(self.env.get(key, "")))
        allow_all = self.settings.auth.allow_all_users or any(
            _truthy(self.env.get(k)) for k in (f"{prefix}_ALLOW_ALL_USERS", "GATEWAY_ALLOW_ALL_USERS")
        )
        return frozenset(ids), allow_all


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def default_home() -> Path:
    raw = os.environ.get("HERMES_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".hermes"


def parse_dotenv(path: Path) -> dict[str, str]:
    """KEY=VALUE lines; '#' comments, optional 'export ', optional quotes."""
    values: dict[str, str] = {}
    if not path.exists():
        return values
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        key, sep, value = line.partition("=")
        key = key.strip()
        if not sep or not key.replace("_", "").isalnum():
            raise ConfigError(f"{path}:{lineno}: expected KEY=VALUE, got a line that is not")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            # An unquoted value ends where a comment begins (as in dotenv and Compose).
            value = value.split(" #", 1)[0].rstrip()
        values[key] = value
    return values


# Environment variables that override config keys (path in the YAML tree).
_ENV_OVERRIDES: dict[str, tuple[str, ...]] = {
    "HERMES_MODEL_BASE_URL": ("model", "base_url"),
    "HERMES_MODEL_API_KEY": ("model", "api_key"),
    "HERMES_MODEL": ("model", "default"),
    "HERMES_MODEL_AUXILIARY": ("model", "auxiliary"),
    "API_SERVER_KEY": ("platforms", "api_server", "key"),
    "API_SERVER_HOST": ("platforms", "api_server", "host"),
    "API_SERVER_PORT": ("platforms", "api_server", "port"),
    "API_SERVER_ENABLED": ("platforms", "api_server", "enabled"),
    "TELEGRAM_BOT_TOKEN": ("platforms", "telegram", "token"),
    "TELEGRAM_WEBHOOK_SECRET": ("platforms", "telegram", "webhook_secret"),
    "TELEGRAM_ENABLED": ("platforms", "telegram", "enabled"),
    "TELEGRAM_MODE": ("platforms", "telegram", "mode"),
    "TELEGRAM_WEBHOOK_URL": ("platforms", "telegram", "webhook_url"),
    "TELEGRAM_BASE_URL": ("platforms", "telegram", "base_url"),
    "TELEGRAM_BASE_FILE_URL": ("platforms", "telegram", "base_file_url"),
    "TELEGRAM_REQUIRE_MENTION": ("platforms", "telegram", "require_mention"),
    "SLACK_BOT_TOKEN": ("platforms", "slack", "bot_token"),
    "SLACK_APP_TOKEN": ("platforms", "slack", "app_token"),
    "SLACK_SIGNING_SECRET": ("platforms", "slack", "signing_secret"),
    "SLACK_ENABLED": ("platforms", "slack", "enabled"),
    "SLACK_MODE": ("platforms", "slack", "mode"),
    "SLACK_API_BASE_URL": ("platforms", "slack", "api_base_url"),
    "DISCORD_BOT_TOKEN": ("platforms", "discord", "token"),
    "DISCORD_ENABLED": ("platforms", "discord", "enabled"),
    "DISCORD_BASE_URL": ("platforms", "discord", "base_url"),
    "DISCORD_GATEWAY_URL": ("platforms", "discord", "gateway_url"),
    "DISCORD_REQUIRE_MENTION": ("platforms", "discord", "require_mention"),
    "DISCORD_FREE_RESPONSE_CHANNELS": ("platforms", "discord", "free_response_channels"),
    "DISCORD_AUTO_THREAD": ("platforms", "discord", "auto_thread"),
    "HERMES_LOG_LEVEL": ("logging", "level"),
    "HERMES_LOG_FORMAT": ("logging", "format"),
}


def _set_path(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    node = tree
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[path[-1]] = value


def _describe(error: ValidationError, source: str) -> str:
    lines = []
    for err in error.errors():
        key = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"unknown key '{key}' in {source}")
        else:
            # A cross-field check's own message, without pydantic's "Value error, " prefix.
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"invalid value for '{key}' in {source}: {msg}")
    return "; ".join(lines)


def load_config(home: Path | None = None, environ: Mapping[str, str] | None = None) -> LoadedConfig:
    home = (home or default_home()).expanduser()
    environ = dict(os.environ if environ is None else environ)
    config_file = home / "config.yaml"
    tree: dict[str, Any] = {}
    if config_file.exists():
        try:
            loaded = yaml.safe_load(config_file.read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            # Only the position and the problem: PyYAML's own message quotes the
            # offending line, which may hold a secret.
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or "syntax error"
            raise ConfigError(f"{config_file} is not valid YAML{where}: {problem}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{config_file} must be a mapping of keys, not {type(loaded).__name__}")
        tree = loaded
    env = {**parse_dotenv(home / ".env"), **environ}
    overridden: list[str] = []
    for var, path in _ENV_OVERRIDES.items():
        if env.get(var):
            _set_path(tree, path, env[var])
            overridden.append(var)
    try:
        settings = Settings.model_validate(tree)
    except ValidationError as exc:
        source = str(config_file)
        if overridden:
            source += f" (or environment: {', '.join(overridden)})"
        raise ConfigError(_describe(exc, source)) from None
    return LoadedConfig(home=home, settings=settings, env=env, config_file=config_file)
