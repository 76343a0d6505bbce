"""The agent's side of hermes-gateway: the agent, its runtime, the model client and its errors.

``core`` may import ``storage`` (for the exception tree) but never
``gateway`` or ``adapters``.

Its names load on first use (PEP 562): a part of the gateway that needs only ``core.errors``
(the command line, for the error tree) does not load the agent and its libraries.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
    from ._background import BackgroundTasks
    from ._settings import AgentSettings
    from .agent import Agent, AgentHost, AnswerOp, HermesAgent, QuestionOp, TurnRequest, TurnResult
    from .compression import CompressOutcome, estimate_tokens
    from .errors import (
        CompressionError,
        ModelAuthError,
        ModelContextLengthError,
        ModelError,
        ModelNotConfiguredError,
        ModelRateLimitError,
        ModelRejectedError,
        ModelResponseError,
        ModelTimeoutError,
        ModelUnavailableError,
    )
    from .llm import ChatResult, ModelClient, ModelSettings, Usage
    from .memory import MemoryLimitError, MemorySnapshot, MemoryStore, MemoryStoreError, MemoryUpdate
    from .model_choice import ModelChoice, ModelPrices
    from .prompt import apply_prompt_caching, build_system_prompt
    from .runtime import AgentRuntime
    from .skills import SkillError, SkillMeta, SkillNeeds, SkillNotFoundError, SkillStore
    from .streaming import AnswerListener

__all__ = [
    "Agent",
    "AgentHost",
    "AgentRuntime",
    "AgentSettings",
    "AnswerListener",
    "AnswerOp",
    "BackgroundTasks",
    "ChatResult",
    "CompressOutcome",
    "CompressionError",
    "HermesAgent",
    "MemoryLimitError",
    "MemorySnapshot",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryUpdate",
    "ModelAuthError",
    "ModelChoice",
    "ModelClient",
    "ModelContextLengthError",
    "ModelError",
    "ModelNotConfiguredError",
    "ModelPrices",
    "ModelRateLimitError",
    "ModelRejectedError",
    "ModelResponseError",
    "ModelSettings",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "QuestionOp",
    "SkillError",
    "SkillMeta",
    "SkillNeeds",
    "SkillNotFoundError",
    "SkillStore",
    "TurnRequest",
    "TurnResult",
    "Usage",
    "apply_prompt_caching",
    "build_system_prompt",
    "estimate_tokens",
]

_WHERE = {
    "Agent": "core.agent",
    "AgentHost": "core.agent",
    "AgentRuntime": "core.runtime",
    "AgentSettings": "core._settings",
    "AnswerListener": "core.streaming",
    "AnswerOp": "core.agent",
    "BackgroundTasks": "core._background",
    "ChatResult": "core.llm",
    "CompressOutcome": "core.compression",
    "CompressionError": "core.errors",
    "HermesAgent": "core.agent",
    "MemoryLimitError": "core.memory",
    "MemorySnapshot": "core.memory",
    "MemoryStore": "core.memory",
    "MemoryStoreError": "core.memory",
    "MemoryUpdate": "core.memory",
    "ModelAuthError": "core.errors",
    "ModelChoice": "core.model_choice",
    "ModelClient": "core.llm",
    "ModelContextLengthError": "core.errors",
    "ModelError": "core.errors",
    "ModelNotConfiguredError": "core.errors",
    "ModelPrices": "core.model_choice",
    "ModelRateLimitError": "core.errors",
    "ModelRejectedError": "core.errors",
    "ModelResponseError": "core.errors",
    "ModelSettings": "core.llm",
    "ModelTimeoutError": "core.errors",
    "ModelUnavailableError": "core.errors",
    "QuestionOp": "core.agent",
    "SkillError": "core.skills",
    "SkillMeta": "core.skills",
    "SkillNeeds": "core.skills",
    "SkillNotFoundError": "core.skills",
    "SkillStore": "core.skills",
    "TurnRequest": "core.agent",
    "TurnResult": "core.agent",
    "Usage": "core.llm",
    "apply_prompt_caching": "core.prompt",
    "build_system_prompt": "core.prompt",
    "estimate_tokens": "core.compression",
}

__getattr__ = lazy_names(__name__, _WHERE)
