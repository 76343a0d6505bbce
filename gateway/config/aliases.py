"""Settings the reference documents in another place than ours, accepted where it puts them.

A user who follows the reference's sessions.md writes ``group_sessions_per_user: false`` at the
top level of config.yaml; ours is ``gateway.group_sessions_per_user``. Before validation each
such key is moved to our place. Neither name wins over the other: the same value under both is
fine, different values are a ``ConfigError`` naming both keys (values are never shown).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gateway.errors import ConfigError

__all__ = ["REFERENCE_ALIASES", "ReferenceAlias", "apply_aliases"]


@dataclass(frozen=True)
class ReferenceAlias:
    reference: tuple[str, ...]
    ours: tuple[str, ...]

    @property
    def reference_key(self) -> str:
        return ".".join(self.reference)

    @property
    def our_key(self) -> str:
        return ".".join(self.ours)

    def __str__(self) -> str:
        return f"{self.reference_key} (= {self.our_key})"


#: every setting of the reference that config.yaml holds elsewhere (settings it documents at
#: our place, such as ``sessions.auto_prune`` or ``display.resume_display``, need none)
REFERENCE_ALIASES: tuple[ReferenceAlias, ...] = (
    ReferenceAlias(("group_sessions_per_user",), ("gateway", "group_sessions_per_user")),
    ReferenceAlias(("thread_sessions_per_user",), ("gateway", "thread_sessions_per_user")),
)

_UNSET = object()


def _pop(tree: dict[str, Any], path: tuple[str, ...]) -> object:
    node: Any = tree
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if not isinstance(node, dict) or path[-1] not in node:
        return _UNSET
    return node.pop(path[-1])


def _get(tree: dict[str, Any], path: tuple[str, ...]) -> object:
    node: Any = tree
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return _UNSET
        node = node[part]
    return node


def _put(tree: dict[str, Any], path: tuple[str, ...], value: object) -> None:
    node = tree
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            # Our section is not a mapping: validation names that problem in its own words.
            return
        node = child
    node[path[-1]] = value


def apply_aliases(tree: dict[str, Any], source: str) -> tuple[ReferenceAlias, ...]:
    """Move each reference key of ``tree`` (config.yaml as read) to our place; the aliases used."""
    used: list[ReferenceAlias] = []
    for alias in REFERENCE_ALIASES:
        value = _pop(tree, alias.reference)
        if value is _UNSET:
            continue
        ours = _get(tree, alias.ours)
        if ours is not _UNSET and ours != value:
            raise ConfigError(
                f"{source} sets both '{alias.reference_key}' (the reference's name) and "
                f"'{alias.our_key}' to different values; they are the same setting: keep one"
            )
        _put(tree, alias.ours, value)
        used.append(alias)
    return tuple(used)
