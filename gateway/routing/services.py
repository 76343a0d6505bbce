"""What the router and the commands share: one object, built by the runner."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from adapters.base import Adapter
from gateway.config.models import LoadedConfig
from gateway.routing.dedupe import Dedupe
from gateway.routing.delivery import Delivery
from gateway.routing.lanes import Lanes
from gateway.routing.session_index import SessionIndex
from storage import StateStore

if TYPE_CHECKING:
    from gateway.handoff.runner import HandoffRunner
    from gateway.routing.commands import CommandRegistry
    from gateway.routing.home_channels import HomeChannels
    from gateway.routing.session_key import SessionKeySettings


class Compressor(Protocol):
    async def compress(self, services: Services, session_key: str, session_id: str) -> str:
        """Summarise and split the session; returns the reply for the user."""


@dataclass
class Services:
    config: LoadedConfig
    store: StateStore
    index: SessionIndex
    dedupe: Dedupe
    lanes: Lanes
    delivery: Delivery
    adapters: dict[str, Adapter]
    commands: CommandRegistry
    model_name: str | None = None
    started_at: float = field(default_factory=time.time)
    #: splits a session by summarising it (the agent core provides it);
    #: /compress answers "not available" while it is None
    compressor: Compressor | None = None
    #: /sethome targets and the /handoff machinery (set by the runner)
    home_channels: HomeChannels | None = None
    handoffs: HandoffRunner | None = None
    #: the router's key rules, so a handed-off thread's key is built the same way
    key_settings: SessionKeySettings | None = None
