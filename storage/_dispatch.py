"""One name per storage function, whichever backend holds the state.

``storage.ops.append_message(conn, …)`` runs the SQLite function when ``conn`` is a
``sqlite3.Connection`` and the PostgreSQL function of the same name otherwise, so the gateway
composes ``store.write(op)`` transactions the same way on both backends. Type checkers see the
SQLite module (``storage/__init__`` imports it under ``TYPE_CHECKING``); at run time each family is
a ``Family`` whose attributes are the SQLite module's, with every public function routed.

The PostgreSQL package is imported on the first call that needs it, so a SQLite deployment
never loads psycopg. The routing costs one type check per call (measured in bench/README.md).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sqlite3
from collections.abc import Callable
from types import ModuleType
from typing import Any


class Family(ModuleType):
    """A family of storage functions (``ops``, ``bindings``…) that routes each call by connection."""

    def __init__(self, sqlite_module: ModuleType, name: str) -> None:
        super().__init__(f"storage.{name}", sqlite_module.__doc__)
        self.__family__ = name
        for attr, value in vars(sqlite_module).items():
            if attr.startswith("__"):
                continue
            routed = (
                inspect.isfunction(value) and not attr.startswith("_")
                and value.__module__ == sqlite_module.__name__ and _takes_a_connection(value)
            )
            setattr(self, attr, _route(name, attr, value) if routed else value)


def _takes_a_connection(fn: Callable[..., Any]) -> bool:
    """Only functions of a connection are routed; a helper of plain values (``message_columns``) is the same
    function on both backends."""
    params = list(inspect.signature(fn).parameters)
    return bool(params) and params[0] == "conn"


def _route(family: str, name: str, sqlite_fn: Callable[..., Any]) -> Callable[..., Any]:
    pg_fn: Callable[..., Any] | None = None

    @functools.wraps(sqlite_fn)
    def call(conn: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal pg_fn
        if type(conn) is sqlite3.Connection:
            return sqlite_fn(conn, *args, **kwargs)
        if pg_fn is None:
            pg_fn = _postgres_function(family, name)
        return pg_fn(conn, *args, **kwargs)

    return call


def _postgres_function(family: str, name: str) -> Callable[..., Any]:
    package = importlib.import_module("storage.postgres")
    module = getattr(package, family, None)
    fn = getattr(module, name, None) if module is not None else None
    if fn is None:
        raise NotImplementedError(f"storage.{family}.{name} has no PostgreSQL version")
    return fn  # type: ignore[no-any-return]
