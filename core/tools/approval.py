"""Asking a person before a tool acts: the request, the answer, and the one call tools make.

A tool that is about to do something dangerous (a command on the dangerous list, a write
outside its roots) builds an ``ApprovalRequest`` and awaits ``require_approval``. Who is asked,
how (buttons, ``/approve``), for how long and what "always" remembers is the gateway's
``Approver``; core only knows that the answer is yes or no, and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ._base import ToolError

if TYPE_CHECKING:
    from ._base import ToolContext


@dataclass(frozen=True)
class ApprovalRequest:
    """One action waiting for a person's yes."""

    #: the tool that asks ("terminal", "write_file")
    tool: str
    #: what would be done, shown to the person verbatim (the command, "write /etc/hosts")
    action: str
    #: why it is asked ("recursive delete outside the workspace")
    reason: str
    #: what "always" remembers for the session: this exact action again is not asked again
    pattern: str


@dataclass(frozen=True)
class ApprovalDecision:
    approved: bool
    #: for the model and the log: "approved by 123", "denied by 123", "no answer within 300 s"
    why: str


class Approver(Protocol):
    """The gateway's side: asks the person of this turn and waits for the answer."""

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        """Yes or no; never raises for a person's answer (cancellation passes through)."""
        ...


async def require_approval(ctx: ToolContext, request: ApprovalRequest) -> ApprovalDecision:
    """Returns when the action may go ahead; raises ``ToolError`` (the model's tool result) when not."""
    if ctx.approver is None:
        raise ToolError(f"Not done: {request.reason}, which needs a person's approval, and nobody can be "
                        "asked from here. Do not retry; tell the user what you wanted to do.")
    decision = await ctx.approver.decide(request)
    if not decision.approved:
        raise ToolError(f"Not done: the user did not approve it ({decision.why}). Do not retry the same "
                        "action; ask the user or find another way.")
    return decision
