"""Configuration: ``$HERMES_HOME/config.yaml`` + ``.env`` + the environment, validated once.

Precedence: environment variables > ``.env`` > ``config.yaml`` > defaults. A section derived
from ``EnvSection`` takes each key from its variable (``TELEGRAM_BOT_TOKEN``,
``API_SERVER_PORT``, ``HERMES_MODEL`` ...; an empty value counts as unset). An unknown or
invalid key refuses to start (exit 78) with the key and the file named. Secrets are
``SecretStr`` and never printed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from adapters.settings import EnvSection, id_list
from gateway.config.aliases import ReferenceAlias, apply_aliases
from gateway.config.envfile import read_dotenv
from gateway.config.mcp import mcp_specs
from gateway.config.models import Settings
from gateway.config.suggest import describe
from gateway.errors import ConfigError
from storage import StorageURL, StorageURLError, parse_storage_url

__all__ = ["PAIRING_KEY_ENV", "LoadedConfig", "default_home", "env_sections", "load_config"]

PAIRING_KEY_ENV = "HERMES_PAIRING_KEY"


@dataclass(frozen=True)
class LoadedConfig:
    home: Path
    settings: Settings
    # .env merged under the process environment; holds secrets, so never shown
    env: Mapping[str, str] = field(repr=False)
    config_file: Path
    #: the reference's names config.yaml used for our settings (``doctor`` names them)
    aliases_used: tuple[ReferenceAlias, ...] = ()
    #: $HERMES_HOME/.env alone, as read at load (its names are secrets a tool's child never gets)
    dotenv: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def db_path(self) -> Path:
        """The default state.db (``storage.url`` may name another file, or PostgreSQL)."""
        return self.home / "state.db"

    @property
    def storage_url(self) -> StorageURL:
        """``storage.url`` (or ``HERMES_STORAGE_URL``) parsed: state.db under the home when unset."""
        raw = self.settings.storage.url
        try:
            return parse_storage_url(raw.get_secret_value() if raw is not None else None, default_path=self.db_path)
        except StorageURLError as exc:
            raise ConfigError(f"{self.config_file}: {exc} (storage.url or HERMES_STORAGE_URL)") from None

    @property
    def pairing_key(self) -> bytes | None:
        """``HERMES_PAIRING_KEY`` (hex, 32 bytes or more): the pairing codes' key that several nodes
        share; None: each home keeps its own ``pairing.key``."""
        raw = self.env.get(PAIRING_KEY_ENV, "").strip()
        if not raw:
            return None
        try:
            key = bytes.fromhex(raw)
        except ValueError:
            key = b""
        if len(key) < 32:  # never the value itself in the message: it is a secret
            raise ConfigError(f"{PAIRING_KEY_ENV} must be at least 64 hexadecimal digits (32 bytes); "
                              "make one with: openssl rand -hex 32")
        return key

    def platform_allowlist(self, platform: str) -> tuple[frozenset[str], bool]:
        """(allowed ids, allow-all) for a platform, from env and config."""
        prefix = platform.upper().replace("-", "_")
        ids = set(self.settings.auth.allowed_users)
        for key in (f"{prefix}_ALLOWED_USERS", "GATEWAY_ALLOWED_USERS"):
            ids.update(id_list(self.env.get(key, "")))
        allow_all = self.settings.auth.allow_all_users or any(
            _truthy(self.env.get(k)) for k in (f"{prefix}_ALLOW_ALL_USERS", "GATEWAY_ALLOW_ALL_USERS")
        )
        return frozenset(ids), allow_all


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


def default_home() -> Path:
    raw = os.environ.get("HERMES_HOME")
    return Path(raw).expanduser() if raw else Path.home() / ".hermes"


def env_sections(model: type[BaseModel] = Settings, path: tuple[str, ...] = ()) -> Iterator[
    tuple[tuple[str, ...], type[EnvSection]]
]:
    """Where in the tree a section takes values from the environment: ``(("platforms", "telegram"),
    TelegramSettings)`` ..."""
    for key, info in model.model_fields.items():
        sub = info.annotation
        if isinstance(sub, type) and issubclass(sub, EnvSection):
            yield (*path, key), sub
        elif isinstance(sub, type) and issubclass(sub, BaseModel):
            yield from env_sections(sub, (*path, key))


def _read_yaml(config_file: Path) -> dict[str, Any]:
    if not config_file.exists():
        return {}
    try:
        loaded = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        # Only the position and the problem: PyYAML's own message quotes the
        # offending line, which may hold a secret.
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "syntax error"
        raise ConfigError(f"{config_file} is not valid YAML{where}: {problem}") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{config_file} must be a mapping of keys, not {type(loaded).__name__}")
    return loaded


def _section(tree: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    node = tree
    for part in path:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    return node


def _apply_env(tree: dict[str, Any], env: Mapping[str, str]) -> list[str]:
    """Put every set variable of an ``EnvSection`` over config.yaml's value; the variables used."""
    used: list[str] = []
    for path, section in env_sections():
        for key, var in section.env_names().items():
            if env.get(var):
                _section(tree, path)[key] = env[var]
                used.append(var)
    return used


def load_config(home: Path | None = None, environ: Mapping[str, str] | None = None) -> LoadedConfig:
    home = (home or default_home()).expanduser()
    environ = dict(os.environ if environ is None else environ)
    config_file = home / "config.yaml"
    tree = _read_yaml(config_file)
    aliases = apply_aliases(tree, str(config_file))
    dotenv = read_dotenv(home / ".env")
    env = {**dotenv, **environ}
    overridden = _apply_env(tree, env)
    try:
        settings = Settings.model_validate(tree)
    except ValidationError as exc:
        source = str(config_file)
        if overridden:
            source += f" (or environment: {', '.join(overridden)})"
        # A bad value is named as the user wrote its key.
        written_as = {a.our_key: a.reference_key for a in aliases}
        raise ConfigError(describe(exc, Settings, source, written_as)) from None
    mcp_specs(settings.mcp_servers, env)  # a ${NAME} that is not set refuses the config now, not at start
    loaded = LoadedConfig(home=home, settings=settings, env=env, config_file=config_file, aliases_used=aliases,
                          dotenv=dotenv)
    _ = loaded.storage_url  # a storage.url that names no backend refuses the config now
    _ = loaded.pairing_key  # and so does a pairing key too short to be one
    return loaded
