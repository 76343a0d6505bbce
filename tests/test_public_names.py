"""Every package's public names resolve: what ``__all__`` promises can be imported.

Several packages load their names on first use (``storage.lazy.lazy_names``); their table of
names is written by hand beside ``__all__``, so a name that moved, or was added to one and not
the other, is found here rather than by the first caller that asks for it."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import ModuleType

import pytest

from storage.lazy import lazy_names

ROOTS = ("storage", "core", "gateway", "adapters")


def _packages() -> list[str]:
    names: list[str] = []
    for root in ROOTS:
        module = importlib.import_module(root)
        names.append(root)
        names += [info.name for info in pkgutil.walk_packages(module.__path__, f"{root}.") if info.ispkg]
    return sorted(names)


def _lazy_table(package: ModuleType) -> dict[str, str] | None:
    """The ``where`` table a package's lazy ``__getattr__`` closes over (None: not lazy)."""
    getter = package.__dict__.get("__getattr__")
    if getter is None or not getter.__qualname__.startswith(f"{lazy_names.__name__}."):
        return None
    tables = [c.cell_contents for c in getter.__closure__ or () if isinstance(c.cell_contents, Mapping)]
    assert len(tables) == 1, f"{package.__name__}: lazy_names' table not found (did lazy_names change?)"
    return dict(tables[0])


@pytest.mark.parametrize("name", _packages())
def test_every_public_name_of_a_package_resolves(name: str) -> None:
    package = importlib.import_module(name)
    exported = list(getattr(package, "__all__", []))
    assert len(exported) == len(set(exported)), f"{name}.__all__ names something twice"
    missing = [n for n in exported if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ promises names it does not have: {missing}"
    table = _lazy_table(package)
    if table is not None:
        assert set(table) <= set(exported), f"{name} loads names it does not export: {set(table) - set(exported)}"
        wrong = [n for n, module in table.items() if getattr(importlib.import_module(module), n) is not getattr(package, n)]
        assert not wrong, f"{name}'s lazy table points elsewhere than the package's names: {wrong}"
