"""A test-only tool that asks before it acts: ``touch`` writes a marker file, but only once a person
approved it (``require_approval``), so a test sees from the file whether the action ran.

The terminal and file tools that ask for real are someone else's; this one stands in for them,
plugged into the real daemon through ``DefaultAgents(client, registry=...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.llm import ModelClient
from core.tools import ApprovalRequest, Tool, ToolContext, ToolRegistry, require_approval
from gateway.daemon.agents import DefaultAgents
from gateway.daemon.runner import Gateway
from gateway.routing.turns import AgentMaker
from tests.fakes.openai_server import FakeOpenAI

REASON = "it writes a file outside the workspace"
#: config for the daemon's tests of approvals: no background model calls (titles, reviews) to race
#: the scripted replies
QUIET_AGENT = {"agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0}}


def touch_request(path: str) -> ApprovalRequest:
    return ApprovalRequest(tool="touch", action=f"touch {path}", reason=REASON, pattern=f"touch {path}")


async def _touch(args: Mapping[str, Any], ctx: ToolContext) -> str:
    path = str(args["path"])
    decision = await require_approval(ctx, touch_request(path))
    with Path(path).open("a") as f:
        f.write(f"{decision.why}\n")
    return f"touched {path}"


TOUCH_TOOL = Tool(
    name="touch",
    description="Append a line to a file (asks the user first).",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    handler=_touch,
)


def approving_agents() -> Callable[[ModelClient], AgentMaker]:
    """The daemon's agents with ``touch`` as their one tool."""
    return lambda client: DefaultAgents(client, registry=ToolRegistry([TOUCH_TOOL]))


def tool_results(bodies: list[Any]) -> list[str]:
    """The content of every tool message the model was sent, in the last request that had any."""
    for body in reversed(bodies):
        found = [str(m.get("content")) for m in (body or {}).get("messages", []) if m.get("role") == "tool"]
        if found:
            return found
    return []


def touch(fake_openai: FakeOpenAI, marker: Path, answer: str = "Done.") -> None:
    """Script the model: call ``touch`` on ``marker``, then say ``answer``."""
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(marker)}}]).reply(answer)


def waiting(gateway: Gateway) -> int:
    """The approvals the daemon holds open now."""
    assert gateway.services is not None
    return gateway.services.approvals.count
