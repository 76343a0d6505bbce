"""/handoff: moving a session to another platform's home channel, with a summary turn there.

Its names load on first use (PEP 562): the terminal chat needs only the done-marker.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
    from gateway.handoff.job import TurnRunner
    from gateway.handoff.runner import HANDOFF_DONE_PREFIX, HandoffRunner

__all__ = ["HANDOFF_DONE_PREFIX", "HandoffRunner", "TurnRunner"]

_WHERE = {
    "HANDOFF_DONE_PREFIX": "gateway.handoff.runner",
    "HandoffRunner": "gateway.handoff.runner",
    "TurnRunner": "gateway.handoff.job",
}

__getattr__ = lazy_names(__name__, _WHERE)
