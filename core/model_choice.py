"""The model one turn runs on, chosen by the gateway (``/model``), with its prices and the model to
fall back to when the server does not serve it.

The shared ``ModelClient`` takes the model per call, so a choice never builds a client.
"""

from __future__ import annotations

from dataclasses import dataclass

from .llm import Usage

__all__ = ["ModelChoice", "ModelPrices"]

_MILLION = 1_000_000


@dataclass(frozen=True)
class ModelPrices:
    """US dollars per million tokens. ``prompt`` applies to prompt tokens that were not cache reads
    (OpenAI-compatible servers count cache reads among the prompt tokens); cache reads cost
    ``cached``, or ``prompt`` when it is not set."""

    prompt: float = 0.0
    completion: float = 0.0
    cached: float | None = None

    def cost(self, usage: Usage) -> float:
        """What one call that used ``usage`` costs."""
        cached = min(usage.cache_read_tokens, usage.input_tokens)
        cached_price = self.prompt if self.cached is None else self.cached
        return ((usage.input_tokens - cached) * self.prompt + cached * cached_price
                + usage.output_tokens * self.completion) / _MILLION


@dataclass(frozen=True)
class ModelChoice:
    """A turn's model. ``fallback``: the model the turn goes on with when the server rejects ``name``
    as unknown (None: the turn fails with the server's error)."""

    name: str
    prices: ModelPrices | None = None
    fallback: ModelChoice | None = None
