"""The core's settings: ``model.*`` (the model client) and ``agent.*`` from config.yaml."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from urllib.parse import urlsplit, urlunsplit

from .toolcalls import TOOL_FORMATS
from .tools import GroupToolPolicy, ToolsetPolicy

#: ``model.max_response_bytes``: its default and its bounds. A chat answer of 4 MiB is about a
#: million tokens, far past any model's output limit; the upper bound keeps every answer below
#: the 10M characters at which the local HTTP API would split it.
DEFAULT_MAX_RESPONSE_BYTES = 4 * 2**20
MIN_RESPONSE_BYTES = 64 * 2**10
MAX_RESPONSE_BYTES = 8 * 2**20


@dataclass(frozen=True)
class AgentSettings:
    #: model calls per turn before the agent stops and says so
    max_iterations: int = 20
    #: the main model's context window, in tokens
    context_length: int = 128_000
    #: compress when the estimated prompt passes this share of the context window
    compression_threshold: float = 0.5
    #: messages at the start of a session that compression never summarises
    head_messages: int = 3
    #: roughly this many tokens at the end that compression never summarises; on a small
    #: context window less, so that a split leaves the session under half the threshold
    tail_tokens: int = 20_000
    #: a memory review every N user turns; 0 = never
    memory_nudge_interval: int = 10
    #: a skill review every N tool-calling iterations; 0 = never
    skill_nudge_interval: int = 10
    #: model calls a background review may make
    review_max_iterations: int = 8
    #: name untitled sessions after their first exchange
    auto_title: bool = True
    #: platform -> which toolsets it may use (missing = all)
    toolsets: Mapping[str, ToolsetPolicy] = field(default_factory=dict)
    #: what is off in groups and channels (``tools.groups``): the terminal, tools that write
    groups: GroupToolPolicy = field(default_factory=GroupToolPolicy)
    #: what session_search reads: "own" = the sessions the asking chat may /resume, "all" = every session
    session_search_scope: str = "own"
    #: user ids ("123", or "telegram:123" for one platform's) whose session_search reads every session
    session_search_owners: frozenset[str] = frozenset()
    #: names of the environment variables set for the daemon (its .env included), for the skills that
    #: require some; None = the process environment
    env_names: frozenset[str] | None = None

    def __post_init__(self) -> None:
        if self.max_iterations < 1 or self.review_max_iterations < 1:
            raise ValueError("agent.max_iterations and agent.review_max_iterations must be at least 1")
        if not 0 < self.compression_threshold <= 1:
            raise ValueError("agent.compression_threshold must be in (0, 1]")
        if self.context_length < 1024:
            raise ValueError("model.context_length must be at least 1024 tokens")
        if self.session_search_scope not in ("own", "all"):
            raise ValueError("session_search.scope must be 'own' or 'all'")

    def policy(self, platform: str) -> ToolsetPolicy:
        return self.toolsets.get(platform, ToolsetPolicy())

    def recalls_everything(self, platform: str, user_id: str | None) -> bool:
        """Whether this user's session_search reads every session, not only their chat's."""
        if self.session_search_scope == "all":
            return True
        owners = self.session_search_owners
        return user_id is not None and (user_id in owners or f"{platform}:{user_id}" in owners)

    @property
    def compression_at(self) -> int:
        """The estimated prompt size (tokens) at which a session is compressed."""
        return int(self.context_length * self.compression_threshold)


#: the prompt cache lifetimes Anthropic-style ``cache_control`` markers accept
CACHE_TTLS = ("5m", "1h")


@dataclass(frozen=True)
class ModelSettings:
    """``model.*`` in config.yaml. Timeouts and backoff are in seconds."""

    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    auxiliary_model: str | None = None
    timeout: float = 120.0
    connect_timeout: float = 10.0
    max_retries: int = 3
    backoff_base: float = 0.5
    backoff_max: float = 20.0
    #: the longest Retry-After the client waits out; a longer one fails the call at once
    max_retry_after: float = 90.0
    #: every model call of one turn (retries, tool steps, a compression) shares this many seconds
    turn_timeout: float = 300.0
    #: the most of one response body that is read; a longer answer is cut there, and says so
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    #: how long a provider with prompt caching keeps the cached prefix: "5m" (its default,
    #: sent as no ttl at all) or "1h"
    cache_ttl: str = "5m"
    #: stream answers to a caller that shows them growing (a turn with an ``AnswerListener``)
    stream: bool = True
    #: how tools reach the model (``core.toolcalls``): "native" (the ``tools`` field), "text" (described
    #: in the system prompt, calls read from the answer), "auto" (native until the server or model shows
    #: it takes them as text)
    tool_format: str = "auto"
    #: model name -> its own tool format (``models.allowed[*].tool_format``), over ``tool_format``
    tool_formats: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.timeout > 0 or not self.connect_timeout > 0:
            raise ValueError("model.timeout and model.connect_timeout must be greater than 0")
        if self.max_retries < 0:
            raise ValueError("model.max_retries must be 0 or more")
        if self.backoff_base < 0 or self.backoff_max < 0:
            raise ValueError("model.backoff_base and model.backoff_max must be 0 or more")
        if self.max_retry_after < 0:
            raise ValueError("model.max_retry_after must be 0 or more")
        if not self.turn_timeout > 0:
            raise ValueError("model.turn_timeout must be greater than 0")
        if not MIN_RESPONSE_BYTES <= self.max_response_bytes <= MAX_RESPONSE_BYTES:
            raise ValueError(f"model.max_response_bytes must be between {MIN_RESPONSE_BYTES} "
                             f"and {MAX_RESPONSE_BYTES} bytes")
        for name, chosen in (("model.tool_format", self.tool_format),
                             *((f"the tool_format of {m!r}", f) for m, f in self.tool_formats.items())):
            if chosen not in TOOL_FORMATS:
                raise ValueError(f"{name} must be one of {', '.join(TOOL_FORMATS)}, not {chosen!r}")
        if self.cache_ttl not in CACHE_TTLS:
            raise ValueError(f"model.cache_ttl must be one of {', '.join(CACHE_TTLS)}, not {self.cache_ttl!r}")

    @property
    def configured(self) -> bool:
        """True when there is an endpoint and a default model to send to it."""
        return bool(self.base_url and self.model)

    def __repr__(self) -> str:
        # Says whether a key is set (useful when debugging config) without showing it.
        shown = []
        for f in fields(self):
            if f.name == "api_key":
                shown.append(f"api_key={'<set>' if self.api_key else None}")
            elif f.name == "base_url" and self.base_url:
                shown.append(f"base_url={display_url(self.base_url)!r}")
            else:
                shown.append(f"{f.name}={getattr(self, f.name)!r}")
        return f"ModelSettings({', '.join(shown)})"


def display_url(url: str) -> str:
    """``url`` without credentials or query string (both may hold secrets), for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(invalid URL)"
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
