"""A real $HERMES_HOME with config.yaml and .env for the config tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr

SECRET_MODEL_KEY = "sk-model-0123456789abcdef"
SECRET_API_KEY = "api-server-key-fedcba987654"


def make_home(tmp_path: Path, config: str | dict[str, Any] | None = None, dotenv: str | None = None) -> Path:
    home = tmp_path / "hermes"
    home.mkdir(parents=True, exist_ok=True)
    if config is not None:
        text = config if isinstance(config, str) else yaml.safe_dump(config)
        (home / "config.yaml").write_text(text, encoding="utf-8")
    if dotenv is not None:
        (home / ".env").write_text(dotenv, encoding="utf-8")
    return home


def secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value()
