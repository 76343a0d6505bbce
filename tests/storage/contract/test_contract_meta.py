"""Meta-checks of the contract: both backends offer each family with the same parameters."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

import storage.postgres
import storage.sqlite

#: the families the PostgreSQL backend offers so far; each one listed here must match SQLite's whole
PORTED: list[str] = [name for name in storage.sqlite.__all__ if isinstance(getattr(storage.sqlite, name), ModuleType)
                     and hasattr(storage.postgres, name)]


def _public_functions(module: ModuleType) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(fn)
        for name, fn in vars(module).items()
        if inspect.isfunction(fn) and not name.startswith("_") and fn.__module__ == module.__name__
    }


@pytest.mark.parametrize("family", PORTED or ["(none yet)"])
def test_a_ported_family_has_every_function_with_the_same_parameters(family: str) -> None:
    if family == "(none yet)":
        pytest.skip("no family is ported to PostgreSQL yet")
    sqlite_fns = _public_functions(getattr(storage.sqlite, family))
    pg_fns = _public_functions(getattr(storage.postgres, family))
    assert sorted(pg_fns) == sorted(sqlite_fns), f"{family}: functions differ"
    for name, sig in sqlite_fns.items():
        ours = [(p.name, p.kind, p.default) for p in sig.parameters.values()][1:]  # after the connection
        theirs = [(p.name, p.kind, p.default) for p in pg_fns[name].parameters.values()][1:]
        assert theirs == ours, f"{family}.{name}: parameters differ"

