"""The daemon's life: start (``Gateway.run``), the runtime parts built once (``build_runtime``),
adapter supervision, systemd readiness and state, and the bounded stop."""

from gateway.daemon.build import Runtime, build_runtime, default_agent_maker
from gateway.daemon.runner import AdapterState, Gateway

__all__ = ["AdapterState", "Gateway", "Runtime", "build_runtime", "default_agent_maker"]
