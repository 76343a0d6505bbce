"""The agent's side of hermes-gateway: the agent, its runtime, the model client and its errors.

``core`` may import ``storage`` (for the exception tree) but never
``gateway`` or ``adapters``.

Its names load on first use (PEP 562): a part of the gateway that needs only ``core.errors``
(the command line, for the error tree) does not load the agent and its libraries.
"""

from typing import TYPE_CHECKING, Any

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
    "Agent": "agent",
    "AgentHost": "agent",
    "AgentRuntime": "runtime",
    "AgentSettings": "_settings",
    "AnswerListener": "streaming",
    "AnswerOp": "agent",
    "BackgroundTasks": "_background",
    "ChatResult": "llm",
    "CompressOutcome": "compression",
    "CompressionError": "errors",
    "HermesAgent": "agent",
    "MemoryLimitError": "memory",
    "MemorySnapshot": "memory",
    "MemoryStore": "memory",
    "MemoryStoreError": "memory",
    "MemoryUpdate": "memory",
    "ModelAuthError": "errors",
    "ModelChoice": "model_choice",
    "ModelClient": "llm",
    "ModelContextLengthError": "errors",
    "ModelError": "errors",
    "ModelNotConfiguredError": "errors",
    "ModelPrices": "model_choice",
    "ModelRateLimitError": "errors",
    "ModelRejectedError": "errors",
    "ModelResponseError": "errors",
    "ModelSettings": "llm",
    "ModelTimeoutError": "errors",
    "ModelUnavailableError": "errors",
    "QuestionOp": "agent",
    "SkillError": "skills",
    "SkillMeta": "skills",
    "SkillNeeds": "skills",
    "SkillNotFoundError": "skills",
    "SkillStore": "skills",
    "TurnRequest": "agent",
    "TurnResult": "agent",
    "Usage": "llm",
    "apply_prompt_caching": "prompt",
    "build_system_prompt": "prompt",
    "estimate_tokens": "compression",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{where}"), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value
