"""gateway.config: precedence, validation and secret hygiene (the .env file: test_envfile.py).

Every test writes real files into a temporary $HERMES_HOME and passes an
explicit environment, so the developer's own environment never leaks in.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from gateway.config import ConfigError, LoadedConfig, Settings, load_config

from ._files import SECRET_API_KEY, SECRET_MODEL_KEY, make_home, secret

# --------------------------------------------------------------- precedence

# (environment variable, path in config.yaml, how to read the effective value)
_OVERRIDES: list[tuple[str, tuple[str, ...], Callable[[Settings], str | None]]] = [
    ("HERMES_MODEL_BASE_URL", ("model", "base_url"), lambda s: s.model.base_url),
    ("HERMES_MODEL", ("model", "default"), lambda s: s.model.default),
    ("HERMES_MODEL_API_KEY", ("model", "api_key"), lambda s: secret(s.model.api_key)),
    ("API_SERVER_KEY", ("platforms", "api_server", "key"), lambda s: secret(s.platforms.api_server.key)),
]


def _nested(path: tuple[str, ...], value: str) -> dict[str, Any]:
    tree: dict[str, Any] = {path[-1]: value}
    for part in reversed(path[:-1]):
        tree = {part: tree}
    return tree


@pytest.mark.parametrize(("var", "path", "get"), _OVERRIDES, ids=[o[0] for o in _OVERRIDES])
@pytest.mark.parametrize("sources", ["none", "yaml", "yaml+dotenv", "yaml+dotenv+environ", "dotenv", "environ"])
def test_precedence_environment_over_dotenv_over_yaml_over_defaults(
    tmp_path: Path, var: str, path: tuple[str, ...], get: Callable[[Settings], str | None], sources: str
) -> None:
    parts = sources.split("+")
    home = make_home(
        tmp_path,
        config=_nested(path, "http://from-yaml.example/v1") if "yaml" in parts else None,
        dotenv=f"{var}=http://from-dotenv.example/v1\n" if "dotenv" in parts else None,
    )
    environ = {var: "http://from-environ.example/v1"} if "environ" in parts else {}
    loaded = load_config(home, environ=environ)
    expected = {
        "none": None,
        "yaml": "http://from-yaml.example/v1",
        "yaml+dotenv": "http://from-dotenv.example/v1",
        "dotenv": "http://from-dotenv.example/v1",
        "yaml+dotenv+environ": "http://from-environ.example/v1",
        "environ": "http://from-environ.example/v1",
    }[sources]
    assert get(loaded.settings) == expected


def test_defaults_without_any_file(tmp_path: Path) -> None:
    home = tmp_path / "empty-home"
    loaded = load_config(home, environ={})
    s = loaded.settings
    assert s == Settings()
    assert s.model.base_url is None and s.model.api_key is None and s.model.default is None
    assert s.gateway.max_concurrent_turns == 16
    assert s.session_reset.mode == "none"
    assert s.platforms.api_server.host == "127.0.0.1"
    assert loaded.config_file == home / "config.yaml"
    assert loaded.db_path == home / "state.db"
    assert loaded.env == {}


def test_environment_is_merged_over_dotenv_in_loaded_env(tmp_path: Path) -> None:
    home = make_home(tmp_path, dotenv="ONLY_DOTENV=a\nBOTH=dotenv\n")
    loaded = load_config(home, environ={"BOTH": "environ", "ONLY_ENV": "b"})
    assert loaded.env == {"ONLY_DOTENV": "a", "BOTH": "environ", "ONLY_ENV": "b"}


def test_environment_overrides_are_validated_as_config_values(tmp_path: Path) -> None:
    home = make_home(tmp_path, config={"platforms": {"api_server": {"port": 9000}}})
    loaded = load_config(home, environ={"API_SERVER_PORT": "9100", "API_SERVER_ENABLED": "false"})
    assert loaded.settings.platforms.api_server.port == 9100
    assert loaded.settings.platforms.api_server.enabled is False
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={"API_SERVER_PORT": "not-a-port"})
    message = str(err.value)
    assert "'platforms.api_server.port'" in message
    assert "API_SERVER_PORT" in message
    assert str(home / "config.yaml") in message


# ------------------------------------------------------- unknown / invalid


@pytest.mark.parametrize(
    ("config", "dotted"),
    [
        ({"bogus": 1}, "bogus"),
        ({"model": {"api_kye": "x"}}, "model.api_kye"),
        ({"gateway": {"max_concurrent": 3}}, "gateway.max_concurrent"),
        ({"platforms": {"api_server": {"prot": 1}}}, "platforms.api_server.prot"),
        ({"platforms": {"telegram": {"tokne": "x"}}}, "platforms.telegram.tokne"),
        ({"session_reset": {"mode": "idle", "idle_mins": 5}}, "session_reset.idle_mins"),
    ],
)
def test_unknown_key_names_dotted_key_and_file(tmp_path: Path, config: dict[str, Any], dotted: str) -> None:
    home = make_home(tmp_path, config=config)
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    message = str(err.value)
    assert f"unknown key '{dotted}'" in message
    assert str(home / "config.yaml") in message


@pytest.mark.parametrize(
    ("config", "dotted"),
    [
        ({"gateway": {"max_concurrent_turns": 0}}, "gateway.max_concurrent_turns"),
        ({"gateway": {"max_queued_per_session": "lots"}}, "gateway.max_queued_per_session"),
        ({"gateway": {"drain_timeout": -1}}, "gateway.drain_timeout"),
        ({"session_reset": {"mode": "weekly"}}, "session_reset.mode"),
        ({"session_reset": {"at_hour": 24}}, "session_reset.at_hour"),
        ({"session_reset": {"idle_minutes": 0}}, "session_reset.idle_minutes"),
        ({"logging": {"level": "verbose"}}, "logging.level"),
        ({"storage": {"synchronous": "OFF"}}, "storage.synchronous"),
        ({"model": {"timeout": 0}}, "model.timeout"),
        ({"model": {"max_retries": 11}}, "model.max_retries"),
        ({"model": {"turn_timeout": 0}}, "model.turn_timeout"),
        ({"model": {"max_response_bytes": 1024}}, "model.max_response_bytes"),
        ({"model": {"max_response_bytes": 64 * 2**20}}, "model.max_response_bytes"),
        ({"platforms": {"api_server": {"port": 70000}}}, "platforms.api_server.port"),
        ({"model": "gpt-4"}, "model"),
        ({"auth": {"allow_all_users": "perhaps"}}, "auth.allow_all_users"),
    ],
)
def test_invalid_value_names_key_and_file(tmp_path: Path, config: dict[str, Any], dotted: str) -> None:
    home = make_home(tmp_path, config=config)
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    message = str(err.value)
    assert f"invalid value for '{dotted}'" in message
    assert str(home / "config.yaml") in message


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    home = make_home(tmp_path, config={"bogus": 1, "gateway": {"max_concurrent_turns": 0}})
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    assert "unknown key 'bogus'" in str(err.value)
    assert "invalid value for 'gateway.max_concurrent_turns'" in str(err.value)


def test_invalid_yaml_names_file(tmp_path: Path) -> None:
    home = make_home(tmp_path, config="model:\n  base_url: [unclosed\n")
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    assert str(home / "config.yaml") in str(err.value)
    assert "not valid YAML" in str(err.value)


@pytest.mark.parametrize(("text", "kind"), [("- a\n- b\n", "list"), ("just a string\n", "str"), ("42\n", "int")])
def test_non_mapping_yaml_is_refused(tmp_path: Path, text: str, kind: str) -> None:
    home = make_home(tmp_path, config=text)
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    assert str(home / "config.yaml") in str(err.value)
    assert f"not {kind}" in str(err.value)


@pytest.mark.parametrize("text", ["", "\n\n", "# nothing configured yet\n", "---\n"])
def test_empty_config_file_gives_defaults(tmp_path: Path, text: str) -> None:
    home = make_home(tmp_path, config=text)
    assert load_config(home, environ={}).settings == Settings()


# --------------------------------------------------------------- secrets


def _loaded_with_secrets(tmp_path: Path) -> LoadedConfig:
    home = make_home(
        tmp_path,
        config={"model": {"api_key": SECRET_MODEL_KEY}},
        dotenv=f"API_SERVER_KEY={SECRET_API_KEY}\n",
    )
    return load_config(home, environ={})


def test_secrets_are_secretstr_and_hidden_in_settings_repr(tmp_path: Path) -> None:
    s = _loaded_with_secrets(tmp_path).settings
    assert isinstance(s.model.api_key, SecretStr)
    assert isinstance(s.platforms.api_server.key, SecretStr)
    assert s.model.api_key.get_secret_value() == SECRET_MODEL_KEY
    assert s.platforms.api_server.key.get_secret_value() == SECRET_API_KEY
    for text in (
        repr(s),
        str(s),
        repr(s.model),
        str(s.model),
        repr(s.platforms),
        str(s.platforms.api_server),
        f"{s}",
        s.model_dump_json(),
        str(s.model_dump()),
    ):
        assert SECRET_MODEL_KEY not in text
        assert SECRET_API_KEY not in text


def test_loaded_config_repr_hides_secrets(tmp_path: Path) -> None:
    """The object handed around the daemon must not print the keys either.

    ``LoadedConfig.env`` holds the raw .env/environment values (model key,
    API server key, bot tokens); a dataclass repr prints all of them.
    """
    loaded = _loaded_with_secrets(tmp_path)
    for text in (repr(loaded), str(loaded)):
        assert SECRET_MODEL_KEY not in text
        assert SECRET_API_KEY not in text


@pytest.mark.parametrize(
    "config",
    [
        {"model": {"api_key": [SECRET_MODEL_KEY]}},
        {"model": {"api_key": {"value": SECRET_MODEL_KEY}}},
        {"model": {"apikey": SECRET_MODEL_KEY}},
        {"model": {"api_key": SECRET_MODEL_KEY, "timeout": "soon"}},
        {"platforms": {"api_server": {"key": SECRET_MODEL_KEY, "port": -1}}},
    ],
)
def test_config_errors_never_contain_secret_values(tmp_path: Path, config: dict[str, Any]) -> None:
    home = make_home(tmp_path, config=config, dotenv=f"API_SERVER_KEY={SECRET_API_KEY}\n")
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    message = str(err.value)
    assert SECRET_MODEL_KEY not in message
    assert SECRET_API_KEY not in message


def test_config_error_for_environment_override_names_variable_not_value(tmp_path: Path) -> None:
    home = make_home(tmp_path, config={"gateway": {"max_concurrent_turns": 0}})
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={"HERMES_MODEL_API_KEY": SECRET_MODEL_KEY, "API_SERVER_KEY": SECRET_API_KEY})
    message = str(err.value)
    assert "HERMES_MODEL_API_KEY" in message and "API_SERVER_KEY" in message
    assert SECRET_MODEL_KEY not in message and SECRET_API_KEY not in message


def test_invalid_yaml_error_does_not_echo_a_secret(tmp_path: Path) -> None:
    """A YAML syntax error on the line that holds a key must not print that line.

    PyYAML's error text quotes the offending line with a caret under it; the
    ConfigError message must keep the file/line/column but not the content.
    """
    home = make_home(tmp_path, config=f'model:\n  api_key: "{SECRET_MODEL_KEY}\n  default: x\n')
    with pytest.raises(ConfigError) as err:
        load_config(home, environ={})
    message = str(err.value)
    assert str(home / "config.yaml") in message
    assert SECRET_MODEL_KEY not in message


# ----------------------------------------------------------- allowlists


def test_allowlist_merges_platform_env_gateway_env_and_config(tmp_path: Path) -> None:
    home = make_home(
        tmp_path,
        config={"auth": {"allowed_users": [1001, "1002"]}},
        dotenv="GATEWAY_ALLOWED_USERS=g1\n",
    )
    loaded = load_config(home, environ={"TELEGRAM_ALLOWED_USERS": "t1, t2  t3,,", "DISCORD_ALLOWED_USERS": "d1"})
    ids, allow_all = loaded.platform_allowlist("telegram")
    assert ids == frozenset({"t1", "t2", "t3", "g1", "1001", "1002"})
    assert allow_all is False
    ids, _ = loaded.platform_allowlist("discord")
    assert ids == frozenset({"d1", "g1", "1001", "1002"})
    ids, _ = loaded.platform_allowlist("slack")
    assert ids == frozenset({"g1", "1001", "1002"})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("12345", {"12345"}),
        (12345, {"12345"}),
        ("1, 2 3", {"1", "2", "3"}),
        ([7, "8"], {"7", "8"}),
        (None, set()),
        ([], set()),
    ],
)
def test_config_allowed_users_shapes_become_strings(tmp_path: Path, raw: Any, expected: set[str]) -> None:
    home = make_home(tmp_path, config={"auth": {"allowed_users": raw}})
    ids, _ = load_config(home, environ={}).platform_allowlist("telegram")
    assert ids == frozenset(expected)
    assert all(isinstance(i, str) for i in ids)


def test_hyphenated_platform_uses_underscored_variable(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    loaded = load_config(home, environ={"API_SERVER_ALLOWED_USERS": "x1", "API_SERVER_ALLOW_ALL_USERS": "1"})
    assert loaded.platform_allowlist("api-server") == (frozenset({"x1"}), True)


@pytest.mark.parametrize("value", ["true", "1", "yes", "TRUE", " Yes ", "on"])
@pytest.mark.parametrize("var", ["TELEGRAM_ALLOW_ALL_USERS", "GATEWAY_ALLOW_ALL_USERS"])
def test_allow_all_switches_on(tmp_path: Path, var: str, value: str) -> None:
    loaded = load_config(make_home(tmp_path), environ={var: value})
    assert loaded.platform_allowlist("telegram")[1] is True
    # The per-platform switch opens only its own platform; the gateway one opens all.
    assert loaded.platform_allowlist("discord")[1] is (var == "GATEWAY_ALLOW_ALL_USERS")


@pytest.mark.parametrize("value", ["false", "0", "no", "", "off", "nope"])
@pytest.mark.parametrize("var", ["TELEGRAM_ALLOW_ALL_USERS", "GATEWAY_ALLOW_ALL_USERS"])
def test_allow_all_switches_off(tmp_path: Path, var: str, value: str) -> None:
    loaded = load_config(make_home(tmp_path), environ={var: value})
    assert loaded.platform_allowlist("telegram") == (frozenset(), False)


def test_allow_all_from_dotenv_and_config(tmp_path: Path) -> None:
    from_dotenv = load_config(make_home(tmp_path / "a", dotenv="TELEGRAM_ALLOW_ALL_USERS=yes\n"), environ={})
    assert from_dotenv.platform_allowlist("telegram")[1] is True
    from_config = load_config(make_home(tmp_path / "b", config={"auth": {"allow_all_users": True}}), environ={})
    assert from_config.platform_allowlist("slack")[1] is True
    # The environment wins over .env for the switch too.
    overridden = load_config(
        make_home(tmp_path / "c", dotenv="TELEGRAM_ALLOW_ALL_USERS=yes\n"), environ={"TELEGRAM_ALLOW_ALL_USERS": "no"}
    )
    assert overridden.platform_allowlist("telegram")[1] is False


def test_model_section_reaches_the_model_client_settings(tmp_path: Path) -> None:
    from gateway.daemon.settings import model_settings

    home = make_home(tmp_path, {"model": {"base_url": "http://127.0.0.1:9/v1", "default": "m", "auxiliary": "small",
                                      "timeout": 30, "max_retries": 2, "max_retry_after": 5,
                                      "turn_timeout": 90, "max_response_bytes": 2**20}})
    s = model_settings(load_config(home, environ={}))
    assert (s.base_url, s.model, s.auxiliary_model) == ("http://127.0.0.1:9/v1", "m", "small")
    assert (s.timeout, s.max_retries, s.max_retry_after) == (30, 2, 5)
    assert (s.turn_timeout, s.max_response_bytes) == (90, 2**20)
