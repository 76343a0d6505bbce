"""The agent's side of hermes-gateway: the model client and its errors.

``core`` may import ``storage`` (for the exception tree) but never
``gateway`` or ``adapters``.
"""

from .errors import (
    ModelAuthError,
    ModelContextLengthError,
    ModelError,
    ModelNotConfiguredError,
    ModelRateLimitError,
    ModelResponseError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from .llm import ChatResult, ModelClient, ModelSettings, Usage

__all__ = [
    "ChatResult",
    "ModelAuthError",
    "ModelClient",
    "ModelContextLengthError",
    "ModelError",
    "ModelNotConfiguredError",
    "ModelRateLimitError",
    "ModelResponseError",
    "ModelSettings",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "Usage",
]
