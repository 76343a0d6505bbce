"""The shape of config.yaml: one model per section, each key with its type, default and bounds.

The platforms' sections are the adapters' own settings models (``adapters.telegram.TelegramSettings``
...), embedded as ``platforms.<name>``. Sections derived from ``EnvSection`` may also be set from
the environment (``HERMES_MODEL_*``, ``HERMES_LOG_*``, ``TELEGRAM_*`` ...); see ``loading``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from adapters.api_server import ApiServerSettings
from adapters.discord import DiscordSettings
from adapters.settings import EnvSection, env_name, id_list
from adapters.slack import SlackSettings
from adapters.telegram import TelegramSettings
from gateway.config.cluster import ClusterConfig
from gateway.config.cron import CronConfig
from gateway.config.model_list import ModelsConfig
from gateway.config.tools import McpServerConfig, ToolsConfig

__all__ = [
    "AgentConfig",
    "AuthConfig",
    "DisplayConfig",
    "GatewayConfig",
    "LoggingConfig",
    "MediaConfig",
    "ModelConfig",
    "ModelPrice",
    "PlatformsConfig",
    "SessionResetConfig",
    "SessionSearchConfig",
    "SessionsConfig",
    "Settings",
    "StorageConfig",
    "StreamingConfig",
    "SttConfig",
    "ToolsetsConfig",
    "TtsConfig",
    "secret_values",
]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(EnvSection):
    """``model``; every key can also be set as ``HERMES_MODEL_<KEY>`` (``default``: ``HERMES_MODEL``)."""

    env_prefix: ClassVar[str] = "HERMES_MODEL_"

    base_url: str | None = None
    api_key: SecretStr | None = None
    default: str | None = Field(default=None, json_schema_extra=env_name("HERMES_MODEL"))
    auxiliary: str | None = None
    timeout: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=3, ge=0, le=10)
    # a provider's Retry-After up to this many seconds is waited out; a longer one fails the turn at once
    max_retry_after: float = Field(default=90.0, ge=0)
    # every model call of one turn (retries, tool steps, a compression) shares this many seconds
    turn_timeout: float = Field(default=300.0, gt=0)
    # the most of one model response that is read (64 KiB .. 8 MiB); a longer answer is cut, and says so
    max_response_bytes: int = Field(default=4 * 2**20, ge=64 * 2**10, le=8 * 2**20)
    # the main model's context window in tokens (compression starts at agent.compression_threshold of it)
    context_length: int = Field(default=128_000, ge=1024)
    # how long a provider with prompt caching (Claude) keeps the cached prefix; 1h costs more to
    # write, 5m is the provider's default and sends no ttl at all
    cache_ttl: Literal["5m", "1h"] = "5m"
    # ask the model for a stream, so that the answer appears as it is written (off: one request,
    # one answer, for servers whose streams are broken)
    stream: bool = True
    # the model reads images (they go to it as OpenAI image_url parts)
    vision: bool = False
    # a model on the same server that describes images in words, for a main model without vision
    vision_auxiliary: str | None = None
    # how tools reach the model: native (the API's tools field), text (described in the system prompt,
    # calls read from the answer: local models without function calling), auto (native until the
    # server refuses tools or the model writes a call as text; then text for that model)
    tool_format: Literal["auto", "native", "text"] = "auto"


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


class SessionSearchConfig(_Section):
    """``session_search``: which past sessions the agent's recall reads."""

    #: own: only the sessions the asking chat may /resume (everything when
    #: sessions.allow_cross_user_resume is on: the same rule); all: every session (one user)
    scope: Literal["own", "all"] = "own"
    #: user ids ("123", or "telegram:123" for one platform's) whose recall reads every session
    owners: list[str] = Field(default_factory=list)

    _split = field_validator("owners", mode="before")(id_list)


class StorageConfig(EnvSection):
    """``storage``: where the state lives and how state.db is written (``HERMES_STORAGE_URL`` …)."""

    env_prefix: ClassVar[str] = "HERMES_STORAGE_"

    #: absent: ``$HERMES_HOME/state.db``; ``sqlite:///abs/path/state.db``; or
    #: ``postgresql://user:password@host:5432/db`` (several nodes over one database)
    url: SecretStr | None = None
    checkpoint_every_commits: int = Field(default=50, ge=1)
    checkpoint_every_seconds: float = Field(default=30.0, gt=0)
    batch_limit: int = Field(default=512, ge=1)
    queue_limit: int = Field(default=10_000, ge=1)
    busy_retry_budget: float = Field(default=15.0, gt=0)
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    #: seconds a committed message may wait for the search indexer while writes keep coming
    index_lag_max: float = Field(default=1.0, gt=0)
    #: PostgreSQL: seconds a transaction waits for a database connection before the database
    #: counts as away (then one second each, until one gets through)
    connect_timeout: float = Field(default=10.0, ge=1, le=300)


UnknownDm = Literal["pair", "ignore"]
#: the platforms whose strangers may be given a pairing code
PAIRING_PLATFORMS = ("telegram", "discord", "slack")


class AuthConfig(_Section):
    allowed_users: list[str] = Field(default_factory=list)
    allow_all_users: bool = False
    #: the people who run this gateway: "123" (that id on every platform) or "telegram:123";
    #: they approve pairings and tools' questions and may use the owner-only commands
    owners: list[str] = Field(default_factory=list)
    #: what a DM from someone not let in gets: "pair" (a pairing code an owner approves) or "ignore"
    #: (nothing); one value, or one per platform ({telegram: pair}). Unset: "pair" while the platform
    #: has no allowlist and no owner, "ignore" once it has one. Groups never get an answer.
    unknown_dm: UnknownDm | dict[str, UnknownDm] | None = None

    _split = field_validator("allowed_users", "owners", mode="before")(id_list)

    @field_validator("unknown_dm")
    @classmethod
    def _known_platforms(cls, value: UnknownDm | dict[str, UnknownDm] | None) -> object:
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(PAIRING_PLATFORMS))
            if unknown:
                raise ValueError(f"unknown_dm names {', '.join(unknown)}: pairing is for "
                                 f"{', '.join(PAIRING_PLATFORMS)}")
        return value

    def unknown_dm_for(self, platform: str) -> UnknownDm | None:
        """``unknown_dm`` as set for ``platform`` (None: not set, the default applies)."""
        if isinstance(self.unknown_dm, dict):
            return self.unknown_dm.get(platform)
        return self.unknown_dm


class PlatformsConfig(_Section):
    """Each platform's section is its adapter's settings model."""

    api_server: ApiServerSettings = Field(default_factory=ApiServerSettings)
    telegram: TelegramSettings = Field(default_factory=TelegramSettings)
    slack: SlackSettings = Field(default_factory=SlackSettings)
    discord: DiscordSettings = Field(default_factory=DiscordSettings)


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
    #: background turns (/bg) running at once per chat; 0 turns /bg off
    max_background: int = Field(default=3, ge=0)
    #: the typing indicator starts once a turn has run this long (a quicker answer needs
    #: none, and each indicator is one more platform API call), then repeats every
    #: typing_interval seconds until the answer is sent
    typing_delay: float = Field(default=0.5, ge=0)
    typing_interval: float = Field(default=4.0, gt=0)


class LoggingConfig(EnvSection):
    """``logging``; ``HERMES_LOG_LEVEL`` and ``HERMES_LOG_FORMAT`` from the environment."""

    env_prefix: ClassVar[str] = "HERMES_LOG_"

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
    #: a tool's result is cut to this many KB before the model sees it and before it is stored
    max_tool_result_kb: int = Field(default=50, ge=1, le=4096)
    # platform name (telegram, api-server, slack, ...) -> toolsets it may use
    toolsets: dict[str, ToolsetsConfig] = Field(default_factory=dict)


class DisplayConfig(_Section):
    """``display``: where the reference keeps it (sessions.md)."""

    #: a resumed terminal chat opens with a recap of its last turns (full) or one line (minimal)
    resume_display: Literal["full", "minimal"] = "full"


class StreamingConfig(_Section):
    """``streaming``: how an answer is shown while the model writes it (``platforms.<name>.streaming``
    switches it off for one platform)."""

    #: the first message is sent once the answer has this many characters ...
    min_chars: int = Field(default=40, ge=1)
    #: ... or this many seconds after the model started writing, whichever comes first
    first_delay: float = Field(default=1.0, ge=0)
    #: one answer's previews at most this often (seconds); a chat sees one edit per interval on
    #: average, two back to back (a quick answer's preview and its final form)
    edit_interval: float = Field(default=1.0, ge=0.2)
    #: show a line per tool call in the streamed message, on every platform that does not say otherwise
    tool_progress: bool = False


class MediaConfig(_Section):
    """``media``: the photos, voice notes and files people send (README, "Photos, voice and files")."""

    #: the largest file downloaded (Telegram's own bot limit is 20 MB)
    max_download_mb: float = Field(default=20, gt=0, le=2048)
    #: the longest one download may take (seconds)
    download_timeout: float = Field(default=120.0, gt=0)
    #: files of a message beyond this many are not taken (Telegram's albums hold 10)
    max_attachments: int = Field(default=10, ge=1, le=50)
    #: stored files are deleted this many days after they came ...
    retention_days: float = Field(default=30, gt=0)
    #: ... and the oldest first while they take more than this
    max_total_mb: float = Field(default=1024, gt=0)
    #: images reach the model at most this many pixels on their long side
    image_max_px: int = Field(default=1568, ge=64, le=8192)
    #: the images of this many earlier turns are shown to the model again; older ones are their text
    image_history_turns: int = Field(default=2, ge=0, le=20)
    #: a text file (code, markdown, csv, json, a log) up to this size is put in the message whole
    max_inline_kb: int = Field(default=100, ge=1, le=4096)
    #: a PDF's text is read from at most this many pages
    pdf_max_pages: int = Field(default=50, ge=1, le=2000)


class SttConfig(EnvSection):
    """``stt``: speech-to-text for voice notes and audio; every key also as ``HERMES_STT_<KEY>``."""

    env_prefix: ClassVar[str] = "HERMES_STT_"

    #: openai: an OpenAI-compatible /v1/audio/transcriptions endpoint (OpenAI, Groq, a whisper
    #: server) at base_url; local: faster-whisper on this machine (the [stt-local] extra);
    #: none: voice notes get a reply that says how to set this up. Unset: openai when base_url is set.
    provider: Literal["openai", "local", "none"] | None = None
    base_url: str | None = None
    model: str = "whisper-1"
    api_key: SecretStr | None = None
    timeout: float = Field(default=60.0, gt=0)
    #: the faster-whisper model size of the local provider (tiny, base, small, medium, large-v3)
    local_model: str = "base"
    #: show the transcript with the answer; unset: in groups and channels only
    echo_transcript: bool | None = None

    @property
    def active(self) -> Literal["openai", "local", "none"]:
        if self.provider is not None:
            return self.provider
        return "openai" if self.base_url else "none"


class TtsConfig(EnvSection):
    """``tts``: voice replies through an OpenAI-compatible /v1/audio/speech endpoint; every key also
    as ``HERMES_TTS_<KEY>``."""

    env_prefix: ClassVar[str] = "HERMES_TTS_"

    base_url: str | None = None
    model: str = "tts-1"
    voice: str = "alloy"
    api_key: SecretStr | None = None
    timeout: float = Field(default=60.0, gt=0)
    #: a voice message is answered with a voice note too (the text still comes); needs base_url
    reply_to_voice: bool = False


class ModelPrice(_Section):
    """``pricing.<model>``: US dollars per million tokens, for the cost in ``hermes-gateway insights``.

    ``input`` applies to the prompt tokens that were not cache reads (the
    OpenAI API counts those among the prompt tokens); cache reads and writes
    cost ``input`` unless priced on their own.
    """

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class Settings(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    #: the models /model may switch to, with labels and prices (``gateway.config.model_list``)
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    session_reset: SessionResetConfig = Field(default_factory=SessionResetConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    session_search: SessionSearchConfig = Field(default_factory=SessionSearchConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    platforms: PlatformsConfig = Field(default_factory=PlatformsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    display: DisplayConfig = Field(default_factory=DisplayConfig)
    streaming: StreamingConfig = Field(default_factory=StreamingConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    stt: SttConfig = Field(default_factory=SttConfig)
    tts: TtsConfig = Field(default_factory=TtsConfig)
    tools: ToolsConfig = Field(default_factory=ToolsConfig)
    #: scheduled jobs (``gateway.scheduler``)
    cron: CronConfig = Field(default_factory=CronConfig)
    #: several nodes over one PostgreSQL database (``gateway.config.cluster``)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    #: name -> an MCP server whose tools the agent gets as mcp_<name>_<tool>
    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    #: model name -> its prices (no entry: that model's cost is not shown)
    pricing: dict[str, ModelPrice] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _channel_models_allowed(self) -> Settings:
        allowed = {m.name for m in self.models.allowed}
        for name in type(self.platforms).model_fields:
            channels = getattr(getattr(self.platforms, name), "channel_models", None) or {}
            for chat, model in channels.items():
                if allowed and model not in allowed:
                    raise ValueError(f"platforms.{name}.channel_models.{chat}: {model!r} is not in models.allowed")
        return self


def secret_values(model: BaseModel) -> list[str]:
    """Every secret a settings tree holds (for the log redactor; never print them)."""
    found: list[str] = []
    for key in type(model).model_fields:
        value = getattr(model, key)
        values = value.values() if isinstance(value, dict) else (value,)
        for item in values:
            if isinstance(item, SecretStr):
                found.append(item.get_secret_value())
            elif isinstance(item, BaseModel):
                found += secret_values(item)
    return found
