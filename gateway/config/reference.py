"""The README's settings tables, made from the models themselves (a test keeps the README equal to
them, and prints the table to paste when it is not)."""

from __future__ import annotations

from typing import Any

from adapters.settings import EnvSection

__all__ = ["settings_table"]


def _default(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, float):
        return f"`{value:g}`"
    if isinstance(value, list | frozenset | set | tuple):
        return "`[" + ", ".join(sorted(str(v) for v in value)) + "]`"
    return f"`{value}`"


def settings_table(section: type[EnvSection]) -> str:
    """A markdown table: each key, the variable that also sets it, its default and what it does."""
    rows = ["| key | variable | default | what |", "|---|---|---|---|"]
    env = section.env_names()
    for key, info in section.model_fields.items():
        # Docstrings quote code RST-style (``x``); markdown wants one backtick.
        what = " ".join((info.description or "").split()).replace("``", "`").replace("|", "\\|")
        default = None if info.default_factory is not None else info.default
        rows.append(f"| `{key}` | `{env[key]}` | {_default(default)} | {what} |")
    return "\n".join(rows) + "\n"

