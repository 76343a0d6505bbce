"""/handoff: moving a session to another platform's home channel, with a summary turn there."""

from gateway.handoff.job import TurnRunner
from gateway.handoff.runner import HANDOFF_DONE_PREFIX, HandoffRunner

__all__ = ["HANDOFF_DONE_PREFIX", "HandoffRunner", "TurnRunner"]
