"""``models`` in config.yaml: the models a chat may switch to with ``/model`` (README, "Models").

Each entry of ``models.allowed`` is a name, or a mapping with the name, a label shown in the picker,
its own ``tool_format`` and its prices (US dollars per million prompt / completion / cached prompt tokens: the cost in
``/usage`` and ``hermes-gateway usage``). With the list empty, ``model.default`` is the only model.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["AllowedModel", "ModelsConfig", "PricesConfig"]


class PricesConfig(BaseModel):
    """US dollars per million tokens; cached prompt tokens cost ``prompt`` unless priced on their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: float = Field(default=0.0, ge=0)
    completion: float = Field(default=0.0, ge=0)
    cached: float | None = Field(default=None, ge=0)


class AllowedModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the model's name as the server knows it (sent as ``model`` in each request)
    name: str = Field(min_length=1, max_length=200)
    #: what the picker and /model show (unset: the name)
    label: str | None = Field(default=None, max_length=75)
    #: unset: the cost of this model is not shown
    prices: PricesConfig | None = None
    #: how this model calls tools (unset: ``model.tool_format``); ``text`` for a local model
    #: served without native function calling (README, "Local models")
    tool_format: Literal["auto", "native", "text"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @property
    def shown(self) -> str:
        return self.label or self.name


class ModelsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the models /model offers (empty: model.default alone)
    allowed: list[AllowedModel] = Field(default_factory=list, max_length=100)

    @field_validator("allowed")
    @classmethod
    def _unique(cls, value: list[AllowedModel]) -> list[AllowedModel]:
        names = [m.name for m in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"a model is listed twice: {', '.join(twice)}")
        return value

    def find(self, name: str) -> AllowedModel | None:
        return next((m for m in self.allowed if m.name == name), None)
