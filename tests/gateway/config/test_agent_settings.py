"""From config to the agent's settings: ``session_search.scope`` and ``session_search.owners``
(validated in config.yaml), and the environment variables skills may require."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core import AgentSettings
from gateway.config import ConfigError, load_config
from gateway.daemon.settings import agent_settings

from ._files import make_home


def _agent(tmp_path: Path, config: dict[str, Any], dotenv: str | None = None,
           environ: dict[str, str] | None = None) -> AgentSettings:
    return agent_settings(load_config(make_home(tmp_path, config=config, dotenv=dotenv), environ=environ or {}))


def test_recall_is_private_by_default(tmp_path: Path) -> None:
    settings = _agent(tmp_path, {})
    assert settings.session_search_scope == "own"
    assert not settings.recalls_everything("telegram", "123")
    assert not settings.recalls_everything("cli", None)


def test_scope_all_is_for_a_single_user_setup(tmp_path: Path) -> None:
    assert _agent(tmp_path, {"session_search": {"scope": "all"}}).recalls_everything("telegram", "123")


def test_recall_follows_resume_when_any_chat_may_resume_any_session(tmp_path: Path) -> None:
    settings = _agent(tmp_path, {"sessions": {"allow_cross_user_resume": True}})
    assert settings.session_search_scope == "all"


@pytest.mark.parametrize("owners", ["123, telegram:456", ["123", "telegram:456"], [123, "telegram:456"]])
def test_owners_by_id_on_every_platform_or_on_one(tmp_path: Path, owners: Any) -> None:
    settings = _agent(tmp_path, {"session_search": {"owners": owners}})
    assert settings.session_search_scope == "own"
    assert settings.recalls_everything("telegram", "123") and settings.recalls_everything("discord", "123")
    assert settings.recalls_everything("telegram", "456")
    assert not settings.recalls_everything("discord", "456")
    assert not settings.recalls_everything("telegram", "789")


@pytest.mark.parametrize(
    ("section", "named"),
    [({"scope": "everyone"}, "session_search.scope"), ({"owners": True}, "session_search.owners"),
     ({"scop": "all"}, "session_search.scop")],
)
def test_a_wrong_value_refuses_to_start_and_names_the_key(tmp_path: Path, section: dict[str, Any],
                                                          named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_config(make_home(tmp_path, config={"session_search": section}), environ={})


def test_the_core_refuses_an_unknown_scope() -> None:
    with pytest.raises(ValueError, match=r"session_search\.scope"):
        AgentSettings(session_search_scope="everyone")


def test_skills_see_the_variables_of_the_environment_and_of_dotenv_by_name(tmp_path: Path) -> None:
    settings = _agent(tmp_path, {}, dotenv="GITHUB_TOKEN=ghp-not-a-real-one\nEMPTY=\n",
                      environ={"FROM_ENVIRON": "1"})
    assert settings.env_names == frozenset({"GITHUB_TOKEN", "FROM_ENVIRON"})
    assert "ghp-not-a-real-one" not in repr(settings)
