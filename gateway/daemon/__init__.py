"""The daemon's life: start (``Gateway.run``), the runtime parts built once (``build_runtime``),
adapter supervision, systemd readiness and state, and the bounded stop.

Its names load on first use: the command line imports ``gateway.daemon.settings`` without
building a daemon, and the daemon's modules bring every platform's library with them."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.daemon.build import Runtime, build_runtime, default_agent_maker
    from gateway.daemon.runner import AdapterState, Gateway

__all__ = ["AdapterState", "Gateway", "Runtime", "build_runtime", "default_agent_maker"]

_WHERE = {"Runtime": "build", "build_runtime": "build", "default_agent_maker": "build",
          "AdapterState": "runner", "Gateway": "runner"}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"gateway.daemon.{where}"), name)
