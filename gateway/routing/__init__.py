"""The path of one message after its adapter: authorization, dedupe, the session key, commands,
the chat's lane, the turn and the delivery of its reply (see ARCHITECTURE.md)."""

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
