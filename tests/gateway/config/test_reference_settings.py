"""Every setting the reference documents works where it documents it.

The reference pages are kept verbatim in ``tests/reference/`` (copies of the team's
``shared/reference``; the other files there hold no config.yaml setting: the mini-hermes book's
config.yaml is its own program's, read by code, and memory-architecture.md names none). They
are scraped web pages: the indentation of their YAML examples is lost, so a snippet is found
by its shape. It starts after a line of prose ending in "config.yaml:" or "set:" and runs
while lines look like ``key:`` or ``key: value  # comment``; a ``key:`` without a value opens a
section that the following lines belong to. Settings named inline in the prose
(``thread_sessions_per_user: true``) are top-level keys of config.yaml, as the page says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import REFERENCE_ALIASES, ConfigError, load_config

from ._files import make_home

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "tests" / "reference"
_INTRO = re.compile(r"(config\.yaml|\bset):\s*$")
_YAML_LINE = re.compile(r"^([a-z][a-z0-9_]*):(?:[ \t]+(\S.*))?$")
_INLINE = re.compile(r"\b([a-z][a-z0-9_]*): (true|false)\b")


@dataclass(frozen=True)
class Snippet:
    where: str
    text: str

    @property
    def tree(self) -> dict[str, Any]:
        loaded = yaml.safe_load(self.text)
        assert isinstance(loaded, dict), self
        return loaded


def _blocks(name: str, lines: list[str]) -> tuple[list[Snippet], set[int]]:
    snippets: list[Snippet] = []
    used: set[int] = set()
    for i, line in enumerate(lines):
        if not _INTRO.search(line):
            continue
        block: list[str] = []
        in_section = False
        for j in range(i + 1, len(lines)):
            m = _YAML_LINE.match(lines[j].strip())
            if m is None:
                break
            used.add(j)
            if m[2] is None:
                block.append(f"{m[1]}:")
                in_section = True
            else:
                block.append(("  " if in_section else "") + lines[j].strip())
        if block:
            snippets.append(Snippet(f"{name}:{i + 2}", "\n".join(block) + "\n"))
    return snippets, used


def reference_snippets() -> list[Snippet]:
    """Every config.yaml example of the reference pages, as config.yaml text."""
    found: list[Snippet] = []
    for path in sorted(REFERENCE.iterdir()):
        lines = path.read_text(encoding="utf-8").splitlines()
        blocks, used = _blocks(path.name, lines)
        found += blocks
        for n, line in enumerate(lines):
            if n not in used:
                found += [Snippet(f"{path.name}:{n + 1}", f"{m[1]}: {m[2]}\n") for m in _INLINE.finditer(line)]
    return found


def _leaves(tree: dict[str, Any], path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    out: list[tuple[tuple[str, ...], Any]] = []
    for key, value in tree.items():
        if isinstance(value, dict):
            out += _leaves(value, (*path, key))
        else:
            out.append(((*path, key), value))
    return out


def _ours(path: tuple[str, ...]) -> tuple[str, ...]:
    return next((a.ours for a in REFERENCE_ALIASES if a.reference == path), path)


def test_the_scan_finds_the_settings_sessions_md_documents() -> None:
    texts = {s.text for s in reference_snippets()}
    assert "display:\n  resume_display: minimal # default: full\n" in texts
    assert "group_sessions_per_user: false\n" in texts
    assert "group_sessions_per_user: true\n" in texts and "thread_sessions_per_user: true\n" in texts
    [prune] = [s for s in reference_snippets() if s.text.startswith("sessions:")]
    assert {p for p, _ in _leaves(prune.tree)} == {
        ("sessions", k) for k in ("auto_prune", "retention_days", "vacuum_after_prune", "min_interval_hours")}


@pytest.mark.parametrize("snippet", reference_snippets(), ids=lambda s: s.where)
def test_each_reference_snippet_loads_and_takes_effect(snippet: Snippet, tmp_path: Path) -> None:
    loaded = load_config(make_home(tmp_path, snippet.text), environ={})
    for path, value in _leaves(snippet.tree):
        node: Any = loaded.settings
        for part in _ours(path):
            node = getattr(node, part)
        assert node == value, (snippet.where, path)


def test_a_reference_name_and_ours_with_different_values_are_refused(tmp_path: Path) -> None:
    home = make_home(tmp_path, "group_sessions_per_user: false\ngateway:\n  group_sessions_per_user: true\n")
    with pytest.raises(ConfigError) as caught:
        load_config(home, environ={})
    assert "'group_sessions_per_user'" in str(caught.value) and "'gateway.group_sessions_per_user'" in str(caught.value)
    assert str(home / "config.yaml") in str(caught.value)


def test_a_reference_name_and_ours_with_the_same_value_are_one_setting(tmp_path: Path) -> None:
    home = make_home(tmp_path, "thread_sessions_per_user: true\ngateway:\n  thread_sessions_per_user: true\n")
    loaded = load_config(home, environ={})
    assert loaded.settings.gateway.thread_sessions_per_user is True
    assert [a.reference_key for a in loaded.aliases_used] == ["thread_sessions_per_user"]


def test_a_bad_value_under_a_reference_name_is_named_as_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"invalid value for 'group_sessions_per_user' in "):
        load_config(make_home(tmp_path, "group_sessions_per_user: sometimes\n"), environ={})


def test_resume_display_takes_only_full_or_minimal(tmp_path: Path) -> None:
    assert load_config(make_home(tmp_path, {}), environ={}).settings.display.resume_display == "full"
    with pytest.raises(ConfigError, match=r"'display.resume_display'"):
        load_config(make_home(tmp_path, "display:\n  resume_display: compact\n"), environ={})


def test_cache_ttl_takes_5m_or_1h_and_names_the_key_otherwise(tmp_path: Path) -> None:
    assert load_config(make_home(tmp_path, {}), environ={}).settings.model.cache_ttl == "5m"
    one_hour = load_config(make_home(tmp_path, {"model": {"cache_ttl": "1h"}}), environ={})
    assert one_hour.settings.model.cache_ttl == "1h"
    with pytest.raises(ConfigError, match=r"invalid value for 'model.cache_ttl'"):
        load_config(make_home(tmp_path, {"model": {"cache_ttl": "10m"}}), environ={})


def test_readme_lists_each_accepted_reference_setting() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for alias in REFERENCE_ALIASES:
        assert f"`{alias.reference_key}` (= `{alias.our_key}`)" in readme, alias
    assert "`display.resume_display`" in readme and "`model.cache_ttl: 1h`" in readme
