"""Every exception the adapters raise on purpose hangs off the project's one tree (``GatewayError``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import adapters
from adapters.base import AdapterError, FatalAdapterError, MalformedUpdateError
from adapters.cli import ChatGoneError
from storage.errors import GatewayError

#: control-flow signals that never leave their module (each documented there as internal)
INTERNAL = {"adapters.telegram._polling._Stalled", "adapters.telegram._polling._Stopped"}


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(adapters.__path__, "adapters."):
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_adapter_exception_is_a_gateway_error_with_a_docstring() -> None:
    classes = _exception_classes()
    assert "adapters.errors.AdapterError" in classes and "adapters.errors.ChatGoneError" in classes
    assert INTERNAL <= classes.keys(), "an internal signal moved: update INTERNAL"
    for name, cls in classes.items():
        assert cls.__doc__ and cls.__doc__.strip(), f"{name} has no docstring"
        if name in INTERNAL:
            assert "internal" in cls.__doc__.lower()
            continue
        assert issubclass(cls, AdapterError), f"{name} is outside the AdapterError branch of GatewayError"
    assert issubclass(AdapterError, GatewayError) and issubclass(FatalAdapterError, AdapterError)


def test_second_bases_that_callers_catch_are_kept() -> None:
    # The control socket catches a gone terminal as a ConnectionError.
    assert issubclass(ChatGoneError, ConnectionError)
    assert issubclass(MalformedUpdateError, ValueError)
