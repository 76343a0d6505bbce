"""What a skill needs before it can be followed: toolsets and environment variables.

The guide's frontmatter (build-a-mini-hermes, "Anatomy of a SKILL.md file")
declares them as ``metadata.hermes.requires_toolsets``; the reference's skills
also write ``requires_toolsets`` at the top level, ``required_environment_variables``
(names, or mappings with a ``name``) and the older ``prerequisites.env_vars``.
A skill whose needs the chat cannot meet is hidden: the model would load
instructions it has no means to carry out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def _names(value: Any) -> list[str]:
    """Names from a YAML string, a list of strings, or a list of ``{name: ...}`` mappings."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out: list[str] = []
    for item in value:
        name = item.get("name") if isinstance(item, Mapping) else item
        if isinstance(name, str | int) and not isinstance(name, bool) and str(name).strip():
            out.append(str(name).strip())
    return out


def required_toolsets(meta: Mapping[str, Any]) -> list[str]:
    hermes = meta.get("metadata")
    hermes = hermes.get("hermes") if isinstance(hermes, Mapping) else None
    nested = hermes.get("requires_toolsets") if isinstance(hermes, Mapping) else None
    return list(dict.fromkeys([*_names(meta.get("requires_toolsets")), *_names(nested)]))


def required_env(meta: Mapping[str, Any]) -> list[str]:
    legacy = meta.get("prerequisites")
    legacy_vars = legacy.get("env_vars") if isinstance(legacy, Mapping) else None
    return list(dict.fromkeys([*_names(meta.get("required_environment_variables")), *_names(legacy_vars)]))


@dataclass(frozen=True)
class SkillNeeds:
    """What one chat's agent has, to check skills against.

    ``toolsets``: the toolsets its tools belong to (None: not checked);
    ``env``: names of the environment variables set for the daemon, its
    ``.env`` included (None: the process environment, read when checked).
    """

    toolsets: frozenset[str] | None = None
    env: frozenset[str] | None = None

    def unmet(self, meta: Mapping[str, Any]) -> list[str]:
        """What the skill of this frontmatter needs and does not have, in words; [] when usable."""
        missing: list[str] = []
        if self.toolsets is not None:
            missing += [f"the {t} toolset" for t in required_toolsets(meta) if t not in self.toolsets]
        env = self.env if self.env is not None else frozenset(k for k, v in os.environ.items() if v)
        missing += [f"the environment variable {name}" for name in required_env(meta) if name not in env]
        return missing
