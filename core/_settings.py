"""``agent.*`` and ``model.context_length`` from config.yaml, as the core sees them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .tools import ToolsetPolicy


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

    def __post_init__(self) -> None:
        if self.max_iterations < 1 or self.review_max_iterations < 1:
            raise ValueError("agent.max_iterations and agent.review_max_iterations must be at least 1")
        if not 0 < self.compression_threshold <= 1:
            raise ValueError("agent.compression_threshold must be in (0, 1]")
        if self.context_length < 1024:
            raise ValueError("model.context_length must be at least 1024 tokens")

    def policy(self, platform: str) -> ToolsetPolicy:
        return self.toolsets.get(platform, ToolsetPolicy())

    @property
    def compression_at(self) -> int:
        """The estimated prompt size (tokens) at which a session is compressed."""
        return int(self.context_length * self.compression_threshold)
