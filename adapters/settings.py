"""What every platform's settings model shares.

A platform's settings are one pydantic model in its adapter package
(``adapters.telegram.TelegramSettings`` ...). The gateway embeds it as
``platforms.<name>`` in config.yaml and fills it from the environment too: each
key ``<key>`` may also be given as ``<env_prefix><KEY>`` (``TELEGRAM_POLL_TIMEOUT``),
or under the name a field declares with :func:`env_name` (``TELEGRAM_BOT_TOKEN``).
The model is validated once, by the gateway's config loader; the adapter gets it
as it is. Secrets are ``SecretStr`` and reach a client library through
:func:`reveal` only.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

__all__ = ["EnvSection", "PlatformSettings", "env_name", "id_list", "reveal"]

_ENV_KEY = "env"


def env_name(variable: str) -> dict[str, Any]:
    """``Field(json_schema_extra=env_name("TELEGRAM_BOT_TOKEN"))``: the variable that sets this key,
    for the few whose documented name is not the section's prefix plus the key."""
    return {_ENV_KEY: variable}


def reveal(secret: SecretStr | None) -> str:
    """The secret's value for a client library ("" when it is not set). Never log the result."""
    return secret.get_secret_value() if secret is not None else ""


def id_list(value: Any) -> Any:
    """Accept "a,b c" strings as well as YAML lists; ids are strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v for v in value.replace(",", " ").split() if v]
    if isinstance(value, bool):
        raise ValueError("expected ids, not true/false")
    if isinstance(value, int):
        return [str(value)]
    if isinstance(value, list | tuple | set | frozenset):
        if any(isinstance(v, bool) for v in value):
            raise ValueError("expected ids, not true/false")
        return [str(v) for v in value]
    return value


class EnvSection(BaseModel):
    """A config.yaml section whose keys may also come from environment variables."""

    # Attribute docstrings become field descriptions: the README's settings tables are made from them.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    #: ``TELEGRAM_``: the variable ``TELEGRAM_POLL_TIMEOUT`` sets ``poll_timeout``.
    env_prefix: ClassVar[str] = ""

    @classmethod
    def env_names(cls) -> dict[str, str]:
        """Key -> the environment variable that sets it."""
        names: dict[str, str] = {}
        for key, info in cls.model_fields.items():
            extra = info.json_schema_extra
            declared = extra.get(_ENV_KEY) if isinstance(extra, dict) else None
            names[key] = declared if isinstance(declared, str) else f"{cls.env_prefix}{key.upper()}"
        return names

    @field_validator("*", mode="after")
    @classmethod
    def _strip_secret(cls, value: Any) -> Any:
        # A token pasted with a trailing newline or space is the same token.
        if isinstance(value, SecretStr):
            return SecretStr(value.get_secret_value().strip())
        return value


class PlatformSettings(EnvSection):
    """A chat platform: on when ``enabled: true``, or when ``enabled`` is not set and its
    credential (``credential_key``) is configured; ``enabled: false`` keeps it off."""

    #: the key whose presence switches the platform on (its bot token)
    credential_key: ClassVar[str]

    enabled: bool | None = None
    """On or off; unset: on when the bot token is set."""

    streaming: bool = True
    """Show the answer growing while the model writes it (false: it arrives whole)."""

    tool_progress: bool | None = None
    """While the answer streams, show a line per tool call ("running memory…"); unset: ``streaming.tool_progress``."""

    channel_models: dict[str, str] = {}
    """Channel (chat) id -> the model its conversations use unless a session chose one with /model (variable: `id=model,id=model`)."""

    @field_validator("channel_models", mode="before")
    @classmethod
    def _channel_ids(cls, value: Any) -> Any:
        if isinstance(value, str):  # from the environment: "C123=big-model, 456=small"
            pairs = [p.split("=", 1) for p in value.replace(",", " ").split() if p]
            if any(len(p) != 2 or not p[0] or not p[1] for p in pairs):
                raise ValueError("expected id=model pairs, separated by commas")
            return dict(pairs)
        # YAML reads an unquoted numeric id as an int.
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else value

    @property
    def active(self) -> bool:
        if self.enabled is not None:
            return self.enabled
        return getattr(self, self.credential_key) is not None
