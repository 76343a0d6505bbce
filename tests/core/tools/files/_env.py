"""What the file-tool tests share besides fixtures: an approver that answers as told, and a call
through the registry (the one door the daemon uses)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from core.tools import ApprovalDecision, ApprovalRequest, Approver, ToolContext, ToolRegistry


@dataclass
class ScriptedApprover:
    """Says ``answer`` to every request and keeps them."""

    answer: bool
    asked: list[ApprovalRequest] = field(default_factory=list)

    async def decide(self, request: ApprovalRequest) -> ApprovalDecision:
        self.asked.append(request)
        return ApprovalDecision(self.answer, "approved by 42" if self.answer else "denied by 42")


def with_approver(ctx: ToolContext, approver: Approver | None) -> ToolContext:
    return replace(ctx, approver=approver)


async def call(registry: ToolRegistry, ctx: ToolContext, name: str, **args: Any) -> tuple[bool, str]:
    outcome = await registry.dispatch(name, args, ctx)
    return outcome.ok, outcome.content
