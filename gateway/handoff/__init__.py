"""/handoff: moving a session to another platform's home channel, with a summary turn there.

Its names load on first use (PEP 562): the terminal chat needs only the done-marker.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.handoff.job import TurnRunner
    from gateway.handoff.runner import HANDOFF_DONE_PREFIX, HandoffRunner

__all__ = ["HANDOFF_DONE_PREFIX", "HandoffRunner", "TurnRunner"]

_WHERE = {
    "HANDOFF_DONE_PREFIX": "gateway.handoff.runner",
    "HandoffRunner": "gateway.handoff.runner",
    "TurnRunner": "gateway.handoff.job",
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where), name)
    globals()[name] = value  # once: later lookups find it without this function
    return value
