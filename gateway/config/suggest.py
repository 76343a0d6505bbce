"""What went wrong in config.yaml, in words: the dotted key, the file, and for a misspelt key the
key that was probably meant ("did you mean …"), at every level of the tree."""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

__all__ = ["closest", "describe", "known_keys"]


def _step(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """(the model a field holds, whether it holds it as the values of a dict)."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        annotation = members[0] if len(members) == 1 else None
    if get_origin(annotation) is dict:
        model, _ = _step(get_args(annotation)[1])
        return model, True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    return None, False


def known_keys(root: type[BaseModel], path: Sequence[str | int]) -> list[str]:
    """The keys config.yaml may use at ``path`` (``("platforms", "telegram")``), [] if none."""
    model: type[BaseModel] | None = root
    in_dict = False
    for part in path:
        if in_dict:  # this part is a dict key (agent.toolsets.<platform>): its value is the model
            in_dict = False
            continue
        if model is None or (info := model.model_fields.get(str(part))) is None:
            return []
        model, in_dict = _step(info.annotation)
    return [] if model is None or in_dict else list(model.model_fields)


def closest(word: str, choices: Sequence[str]) -> str | None:
    """The choice ``word`` was probably meant to be ("did you mean"), case aside; None when none is close."""
    lowered = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.5)
    return lowered[close[0]] if close else None


def _unknown(root: type[BaseModel], loc: tuple[str | int, ...], source: str) -> str:
    dotted = ".".join(str(p) for p in loc)
    line = f"unknown key '{dotted}' in {source}"
    close = difflib.get_close_matches(str(loc[-1]), known_keys(root, loc[:-1]), n=1)
    if close:
        meant = ".".join([*(str(p) for p in loc[:-1]), close[0]])
        line += f" (did you mean '{meant}'?)"
    return line


def describe(error: ValidationError, root: type[BaseModel], source: str,
             written_as: Mapping[str, str] | None = None) -> str:
    """Every problem of ``error`` (validating ``root`` from ``source``), on one line; values never shown.

    ``written_as`` names a key by what config.yaml called it (a reference alias) instead of ours.
    """
    lines = []
    for err in error.errors():
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden" and loc:
            lines.append(_unknown(root, loc, source))
        else:
            key = ".".join(str(p) for p in loc) or "(top level)"
            key = (written_as or {}).get(key, key)
            # A cross-field check's own message, without pydantic's "Value error, " prefix.
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"invalid value for '{key}' in {source}: {msg}")
    return "; ".join(lines)
