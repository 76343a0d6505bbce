"""The agent's side of hermes-gateway: the agent, its runtime, the model client and its errors.

``core`` may import ``storage`` (for the exception tree) but never
``gateway`` or ``adapters``.
"""

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
