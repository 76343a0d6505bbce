"""Package names that load on first use (PEP 562), for a package's ``__init__``.

A package exports its public names from ``__init__``; importing them all there would load every
module of the package (and its libraries) for a caller that needs one name. The command line,
which imports the error tree and a client, then spent a second loading the agent and every
platform's library. ``lazy_names`` gives such a package a module ``__getattr__`` that imports a
name's module the first time the name is asked for, and keeps it.

It lives in ``storage``, the package every other one may import (like the root of the error tree,
``storage.errors``), so that the adapters' packages can use it as well as core's and the gateway's.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``package``: ``where`` maps each exported name to its module."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # once: later lookups never come here
        return value

    return __getattr__
