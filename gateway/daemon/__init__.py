"""The daemon's life: start (``Gateway.run``), the runtime parts built once (``build_runtime``),
adapter supervision, systemd readiness and state, and the bounded stop.

Its names load on first use: the command line imports ``gateway.daemon.settings`` without
building a daemon, and the daemon's modules bring every platform's library with them."""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
    from gateway.daemon.build import Runtime, build_runtime, default_agent_maker
    from gateway.daemon.runner import AdapterState, Gateway

__all__ = ["AdapterState", "Gateway", "Runtime", "build_runtime", "default_agent_maker"]

_WHERE = {"Runtime": "gateway.daemon.build", "build_runtime": "gateway.daemon.build",
          "default_agent_maker": "gateway.daemon.build", "AdapterState": "gateway.daemon.runner",
          "Gateway": "gateway.daemon.runner"}

__getattr__ = lazy_names(__name__, _WHERE)
