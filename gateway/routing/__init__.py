"""The path of one message after its adapter: authorization, dedupe, the session key, commands,
the chat's lane, the turn and the delivery of its reply (see ARCHITECTURE.md).

Its names load on first use (PEP 562): a module that needs one part (the terminal chat, a\ncommand-line call) does not load the router and, through it, the agent.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

if TYPE_CHECKING:
    from gateway.routing.approvals import Approvals, PendingApproval, TurnApprover
    from gateway.routing.auth import Authorizer
    from gateway.routing.commands import Command, CommandContext, CommandRegistry, parse_command
    from gateway.routing.delivery import Delivery
    from gateway.routing.lanes import LaneGate, Lanes
    from gateway.routing.metrics import GatewayMetrics
    from gateway.routing.owners import Owners
    from gateway.routing.pairing import Pairing, PairingOutcome
    from gateway.routing.resets import MemoryFlush, Resets
    from gateway.routing.router import Router
    from gateway.routing.services import Compressor, Handoffs, Services
    from gateway.routing.session_index import SessionIndex
    from gateway.routing.session_key import SessionKeySettings, build_session_key
    from gateway.routing.turns import AgentMaker, Turns

__all__ = [
    "AgentMaker",
    "Approvals",
    "Authorizer",
    "Command",
    "CommandContext",
    "CommandRegistry",
    "Compressor",
    "Delivery",
    "GatewayMetrics",
    "Handoffs",
    "LaneGate",
    "Lanes",
    "MemoryFlush",
    "Owners",
    "Pairing",
    "PairingOutcome",
    "PendingApproval",
    "Resets",
    "Router",
    "Services",
    "SessionIndex",
    "SessionKeySettings",
    "TurnApprover",
    "Turns",
    "build_session_key",
    "parse_command",
]

_WHERE = {
    "AgentMaker": "gateway.routing.turns",
    "Approvals": "gateway.routing.approvals",
    "Authorizer": "gateway.routing.auth",
    "Command": "gateway.routing.commands",
    "CommandContext": "gateway.routing.commands",
    "CommandRegistry": "gateway.routing.commands",
    "Compressor": "gateway.routing.services",
    "Delivery": "gateway.routing.delivery",
    "GatewayMetrics": "gateway.routing.metrics",
    "Handoffs": "gateway.routing.services",
    "LaneGate": "gateway.routing.lanes",
    "Lanes": "gateway.routing.lanes",
    "MemoryFlush": "gateway.routing.resets",
    "Owners": "gateway.routing.owners",
    "Pairing": "gateway.routing.pairing",
    "PairingOutcome": "gateway.routing.pairing",
    "PendingApproval": "gateway.routing.approvals",
    "Resets": "gateway.routing.resets",
    "Router": "gateway.routing.router",
    "Services": "gateway.routing.services",
    "SessionIndex": "gateway.routing.session_index",
    "SessionKeySettings": "gateway.routing.session_key",
    "TurnApprover": "gateway.routing.approvals",
    "Turns": "gateway.routing.turns",
    "build_session_key": "gateway.routing.session_key",
    "parse_command": "gateway.routing.commands",
}

__getattr__ = lazy_names(__name__, _WHERE)
