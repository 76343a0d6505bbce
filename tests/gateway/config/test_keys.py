"""Every setting the project names exists, and a misspelt one gets "did you mean …".

The text of the source (gateway/, adapters/, core/), its error messages and the README
is scanned for ``platforms.<name>.<key>`` and for the platforms' environment variables;
each must be something config.yaml (or the environment) accepts. A message that tells
the user to set a key the loader then rejects is the bug this guards against.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from adapters.settings import EnvSection
from gateway.config import ConfigError, PlatformsConfig, env_sections, load_config, settings_table

from ._files import make_home

ROOT = Path(__file__).resolve().parents[3]
_KEY_RE = re.compile(r"\bplatforms\.([a-z_]+)\.([a-z_]+)\b")
_VAR_RE = re.compile(r"\b(?:TELEGRAM|SLACK|DISCORD|API_SERVER|HERMES_MODEL|HERMES_LOG)_[A-Z0-9_]+\b")
# The allowlist's variables belong to auth, not to a platform's section.
_ALLOWLIST_VAR_RE = re.compile(r"[A-Z_]+_(ALLOWED_USERS|ALLOW_ALL_USERS)")


def _texts() -> dict[str, str]:
    files = [p for d in ("gateway", "adapters", "core") for p in sorted((ROOT / d).rglob("*.py"))]
    files += [p for p in (ROOT / "README.md", ROOT / "ARCHITECTURE.md", ROOT / "Dockerfile") if p.exists()]
    files += sorted((ROOT / "systemd").glob("*"))
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in files if p.is_file()}


def _named_keys() -> dict[tuple[str, str], str]:
    """(platform, key) -> the first file that names it."""
    found: dict[tuple[str, str], str] = {}
    for name, text in _texts().items():
        for m in _KEY_RE.finditer(text):
            found.setdefault((m[1], m[2]), name)
    return found


def _section(platform: str) -> type[EnvSection]:
    annotation = PlatformsConfig.model_fields[platform].annotation
    assert isinstance(annotation, type) and issubclass(annotation, EnvSection)
    return annotation


def _valid_value(section: type[EnvSection], key: str) -> Any:
    """A value config.yaml may hold for ``key``: its default, or for a key without one a string
    (the section is switched off, so no token is checked)."""
    if key == "enabled":
        return False
    default = section().model_dump(mode="json")[key]
    return default if default is not None else "set-in-test"


def test_the_scan_sees_the_messages_it_guards() -> None:
    named = _named_keys()
    # The Discord rate-limit error names this key; config.yaml once rejected it as unknown.
    assert ("discord", "max_ratelimit_wait") in named
    assert {p for p, _ in named} >= {"telegram", "slack", "discord", "api_server"}


def test_every_named_platform_key_is_accepted_by_the_loader(tmp_path: Path) -> None:
    named = _named_keys()
    unknown = [f"platforms.{p}.{k} ({where})" for (p, k), where in named.items()
               if p not in PlatformsConfig.model_fields or k not in _section(p).model_fields]
    assert not unknown, f"named but not a config key: {unknown}"
    platforms: dict[str, dict[str, Any]] = {}
    for platform, key in named:
        section = platforms.setdefault(platform, {"enabled": False})
        section[key] = _valid_value(_section(platform), key)
    loaded = load_config(make_home(tmp_path, {"platforms": platforms}), environ={})
    for platform, key in named:
        section = getattr(loaded.settings.platforms, platform)
        if not hasattr(getattr(section, key), "get_secret_value"):  # a secret's dump is masked
            assert section.model_dump(mode="json")[key] == platforms[platform][key], (platform, key)

def test_every_named_variable_sets_a_key() -> None:
    known = {var for _, section in env_sections() for var in section.env_names().values()}
    stray = sorted({f"{m[0]} ({name})" for name, text in _texts().items() for m in _VAR_RE.finditer(text)
                    if m[0] not in known and not _ALLOWLIST_VAR_RE.fullmatch(m[0])})
    assert not stray, f"named but read by nothing: {stray}"


@pytest.mark.parametrize("platform", list(PlatformsConfig.model_fields))
def test_readme_has_each_platforms_settings_table_as_the_model_makes_it(platform: str) -> None:
    """Every key of the model is named in the README, with its variable and default, and nothing else."""
    table = settings_table(_section(platform))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert table in readme, f"README.md: replace the platforms.{platform} settings table with\n\n{table}"


@pytest.mark.parametrize(
    ("config", "unknown", "meant"),
    [
        ({"platfroms": {}}, "platfroms", "platforms"),
        ({"gateway": {"max_concurrent": 3}}, "gateway.max_concurrent", "gateway.max_concurrent_turns"),
        ({"platforms": {"telgram": {}}}, "platforms.telgram", "platforms.telegram"),
        ({"platforms": {"telegram": {"tokne": "x"}}}, "platforms.telegram.tokne", "platforms.telegram.token"),
        ({"platforms": {"discord": {"max_rate_limit_wait": 5}}}, "platforms.discord.max_rate_limit_wait",
         "platforms.discord.max_ratelimit_wait"),
        ({"platforms": {"api_server": {"prot": 1}}}, "platforms.api_server.prot", "platforms.api_server.port"),
        ({"agent": {"toolsets": {"telegram": {"disabeld": ["skills"]}}}}, "agent.toolsets.telegram.disabeld",
         "agent.toolsets.telegram.disabled"),
    ],
)
def test_unknown_key_suggests_the_closest_at_every_level(
    tmp_path: Path, config: dict[str, Any], unknown: str, meant: str
) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(make_home(tmp_path, config), environ={})
    assert f"unknown key '{unknown}'" in str(err.value)
    assert f"did you mean '{meant}'?" in str(err.value)


def test_unknown_key_far_from_every_key_gets_no_guess(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(make_home(tmp_path, {"gateway": {"zzzz": 1}}), environ={})
    assert "unknown key 'gateway.zzzz'" in str(err.value) and "did you mean" not in str(err.value)
