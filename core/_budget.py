"""The time budget of one turn: every model call of the turn, retries included, fits in it.

A hung model used to hold a chat for attempts × ``model.timeout`` per call, and
a turn makes several calls (the tool loop, a compression's memory flush and
summary). Now the agent opens a budget when a turn starts (``turn_budget``) and
every ``ModelClient.chat`` awaited inside it reads the budget from a context
variable, so nothing between the agent and the client has to carry it along.

Work the turn only starts (background reviews, titles) is not part of the turn:
``outside_budget`` gives the context to start it in.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["TurnBudget", "current_budget", "outside_budget", "turn_budget"]


@dataclass(frozen=True)
class TurnBudget:
    """``seconds`` for the whole turn, spent by ``deadline`` (``time.monotonic``)."""

    seconds: float
    deadline: float

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


_current: contextvars.ContextVar[TurnBudget | None] = contextvars.ContextVar("hermes_turn_budget", default=None)


@contextmanager
def turn_budget(seconds: float) -> Iterator[TurnBudget]:
    """Model calls inside share ``seconds`` from now (or what is left of an enclosing budget, if less)."""
    budget = TurnBudget(seconds, time.monotonic() + seconds)
    outer = _current.get()
    if outer is not None and outer.deadline < budget.deadline:
        budget = outer
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)


def current_budget() -> TurnBudget | None:
    """The budget of the turn this code runs in; None outside a turn."""
    return _current.get()


def outside_budget() -> contextvars.Context:
    """A copy of the current context without the turn's budget, to start background work in."""
    context = contextvars.copy_context()
    context.run(_current.set, None)
    return context
