"""``model.tool_format``: auto, native or text, into the model client's settings; anything else named."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.llm import ModelSettings
from core.toolcalls import ToolFormats, tool_format_for
from gateway.config import ConfigError, load_config
from gateway.daemon.settings import model_settings

from ._files import make_home


def test_tool_format_defaults_to_auto_and_reaches_the_model_client(tmp_path: Path) -> None:
    assert model_settings(load_config(make_home(tmp_path, {}), environ={})).tool_format == "auto"
    text = load_config(make_home(tmp_path, {"model": {"tool_format": "text"}}), environ={})
    assert model_settings(text).tool_format == "text"
    from_env = load_config(make_home(tmp_path, {}), environ={"HERMES_MODEL_TOOL_FORMAT": "native"})
    assert model_settings(from_env).tool_format == "native"


def test_an_unknown_tool_format_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid value for 'model.tool_format'"):
        load_config(make_home(tmp_path, {"model": {"tool_format": "json"}}), environ={})


def test_a_model_of_its_own_overrides_the_default() -> None:
    overrides = {"gemma3:12b": "text", "gpt-4o": "native"}
    assert tool_format_for("gemma3:12b", "auto", overrides) == "text"
    assert tool_format_for("qwen3:8b", "auto", overrides) == "auto"
    formats = ToolFormats("native", overrides)
    assert formats.of("gemma3:12b") == "text" and formats.of("other") == "native"
    formats.learn_text("other", "test")  # only auto learns
    assert formats.of("other") == "native"
    with pytest.raises(ValueError, match="the tool_format of 'x' must be one of auto, native, text"):
        ModelSettings(tool_formats={"x": "json"})


def test_an_allowed_model_s_own_tool_format_reaches_the_model_client(tmp_path: Path) -> None:
    config = load_config(make_home(tmp_path, {"model": {"default": "gpt-4o", "tool_format": "native"}, "models": {
        "allowed": ["gpt-4o", {"name": "gemma3:12b", "tool_format": "text"}]}}), environ={})
    settings = model_settings(config)
    assert settings.tool_formats == {"gemma3:12b": "text"}
    assert ToolFormats(settings.tool_format, settings.tool_formats).of("gemma3:12b") == "text"
    assert ToolFormats(settings.tool_format, settings.tool_formats).of("gpt-4o") == "native"
    with pytest.raises(ConfigError, match="tool_format"):
        load_config(make_home(tmp_path, {"models": {"allowed": [{"name": "x", "tool_format": "json"}]}}),
                    environ={})
