"""What one handoff is while it runs: the job, how far its transfer got, the turn it queues."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from adapters.base import InboundMessage
from gateway.routing.home_channels import HomeChannel
from gateway.routing.session_index import PriorBinding


class TurnRunner(Protocol):
    """Runs one agent turn in a key's lane (``Turns.run_in_lane``); True when the
    reply was delivered. ``prepare`` runs in the lane right before the turn. Cancelling
    the await withdraws the turn (or stops it, if it already runs)."""

    def __call__(self, msg: InboundMessage, key: str, text: str, *,
                 prepare: Callable[[], Awaitable[None]] | None = None) -> Awaitable[bool]: ...


@dataclass(frozen=True)
class Job:
    handoff_id: int
    session_id: str
    source: InboundMessage
    source_key: str
    target: str
    home: HomeChannel
    #: this node tells the source chat how it ended (and holds it meanwhile); False on the node
    #: that runs another node's request (``remote``), where the requester tells it
    tell: bool = True


@dataclass
class Progress:
    """How far the transfer got: what a failure has to undo."""

    target_key: str | None = None
    #: the destination key's rebinding, once started (its result: what to restore)
    binding: asyncio.Future[PriorBinding] | None = None


def synthetic_prompt(source_platform: str, title: str) -> str:
    return (
        f'[This session ("{title}") was just handed off from {source_platform} to this channel. '
        "The earlier conversation is above. Briefly confirm that you are continuing here and "
        "summarise what we were working on, so the user can carry on from this device.]"
    )
