"""How a turn's answer leaves the agent while the model writes it.

A caller that shows the answer growing (a chat message edited in place, an SSE
response, a terminal) puts an ``AnswerListener`` on the ``TurnRequest``. The
agent calls it from the event loop as deltas arrive; it must not block or
raise (a listener that fails is the caller's problem, never the turn's). What
the listener saw is only a preview: the stored assistant message, written
once at the end, is the answer.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["AnswerListener"]


class AnswerListener(Protocol):
    def text(self, delta: str) -> None:
        """More text of the current model call, in order."""

    def discard(self) -> None:
        """What ``text`` gave since the last discard is not part of the answer: the call asked
        for tools (its text was a preamble), or its stream broke and the call is made again."""

    def tool(self, name: str) -> None:
        """A tool call named ``name`` starts (shown as progress where a platform asks for it)."""
