"""What the router, the turns and the commands share: one object, built once and complete.

The daemon builds it from the validated config before anything runs
(``gateway.daemon.build``); nothing is assigned to it afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from adapters.base import Adapter, InboundMessage
from core.tools import CronPort, ToolOverview
from core.tools.mcp import McpManager
from gateway.config import LoadedConfig
from gateway.media import MediaIntake
from gateway.routing.approvals import Approvals
from gateway.routing.dedupe import Dedupe
from gateway.routing.delivery import Delivery
from gateway.routing.home_channels import HomeChannels
from gateway.routing.lanes import Lanes
from gateway.routing.metrics import GatewayMetrics
from gateway.routing.models import ModelPickers
from gateway.routing.owners import Owners
from gateway.routing.pairing import Pairing
from gateway.routing.restart import RestartSwitch
from gateway.routing.session_index import SessionIndex
from gateway.routing.session_key import SessionKeySettings
from storage import Store


class Compressor(Protocol):
    async def compress(self, services: Services, session_key: str, session_id: str) -> str:
        """Summarise and split the session; returns the reply for the user."""


class ToolLister(Protocol):
    def tool_overview(self, services: Services, platform: str, chat_type: str | None) -> ToolOverview:
        """Every tool an agent of this chat would have, on offer or not and why (/tools)."""


class SideQuestions(Protocol):
    async def side_answer(self, services: Services, session_id: str, platform: str, chat_type: str,
                          question: str, *, model: str | None = None) -> str:
        """/btw: an answer on a snapshot of the session, added to nothing (``model``: the chat's, by
        /model's rules; None: the default)."""


class Handoffs(Protocol):
    """The /handoff machinery as the router and the commands see it (``gateway.handoff``)."""

    def in_flight(self, source_key: str) -> str | None:
        """The platform this key's session is being handed off to right now, if any."""

    async def held(self, source_key: str) -> str | None:
        """``in_flight``, and on several nodes any node's handoff of this key (its row)."""

    async def request(self, source: InboundMessage, source_key: str, target: str, *,
                      announce: Callable[[], Awaitable[None]] | None = None) -> str:
        """Validate and start a handoff; raises HandoffRefusedError with the reason."""


class CronPorts(Protocol):
    """Gives each turn the ``cronjob`` tool's port for its chat (``gateway.commands.cron_tool``):
    routing makes the turn but sits below the scheduler, so it cannot build the port itself."""

    def port(self, services: Services, msg: InboundMessage, session_key: str) -> CronPort | None:
        """The port of this chat's turn; None: scheduled jobs are off."""


@dataclass(frozen=True)
class SkillCall:
    """What ``/<skill-name> args`` comes to: the turn's text, or a reply instead (the skill is gone)."""

    text: str | None = None
    reply: str | None = None


class SkillCommandsPort(Protocol):
    """The installed skills as commands (``gateway.commands.skills.SkillCommands``)."""

    async def call(self, name: str, args: str) -> SkillCall | None:
        """``/name args`` as a skill's call; None when ``name`` is no skill's command."""

    def help_lines(self) -> list[tuple[str, str]]:
        """(command, description) of every skill's command, for /help."""

    async def refresh(self) -> None:
        """Look at the skills folder again (a skill installed or removed since)."""


@dataclass(frozen=True)
class Services:
    config: LoadedConfig
    store: Store
    index: SessionIndex
    dedupe: Dedupe
    lanes: Lanes
    delivery: Delivery
    adapters: dict[str, Adapter]
    #: the one place a chat's key rules live: router, /handoff, control socket and terminal chat read it
    key_settings: SessionKeySettings
    home_channels: HomeChannels
    metrics: GatewayMetrics
    #: splits a session by summarising it (the agent core provides it); /compress answers
    #: "not available" when the daemon runs a custom agent without one
    compressor: Compressor | None = None
    #: attachments taken in for a turn; None: messages with files are told they cannot be read
    media: MediaIntake | None = None
    #: the daemon's MCP servers (None: none configured); started and closed by the daemon
    mcp: McpManager | None = None
    #: answers /btw's side questions (None: a custom agent; /btw says it is not available)
    side_questions: SideQuestions | None = None
    #: the agent's tools as /tools and `hermes-gateway tools` show them (None: a custom agent)
    tools: ToolLister | None = None
    model_name: str | None = None
    #: the approval questions waiting for a person (``tools.approvers`` may answer any)
    approvals: Approvals = field(default_factory=Approvals)
    #: the scheduled jobs, a ``gateway.scheduler.Jobs`` (None: cron.enabled is off or a test
    #: without them). Routing sits below the scheduler and cannot name its type: read it as
    #: ``services.jobs`` or typed with ``gateway.scheduler.jobs_of(services)``.
    jobs: Any = None
    #: the ``cronjob`` tool's port per turn (None: the tool says scheduled jobs are not available)
    cron_ports: CronPorts | None = None
    #: who owns this gateway (``auth.owners``, and owners recorded by pairing)
    owners: Owners = field(default_factory=Owners)
    #: the installed skills as ``/<skill-name>`` commands (None: none, as in tests without a home)
    skill_commands: SkillCommandsPort | None = None
    #: /restart's switch (``gateway.routing.restart``); None: this run cannot restart itself
    restart: RestartSwitch | None = None
    #: the /model menus waiting for a press
    pickers: ModelPickers = field(default_factory=ModelPickers)
    #: a sender's export and forget, a ``gateway.userdata.UserData`` (None: a test without it). Routing
    #: sits below that room: read it typed with ``gateway.userdata.userdata_of(services)``.
    userdata: Any = None
    #: pairing codes and the users owners let in (None: no pairing, as in tests without it)
    pairing: Pairing | None = None
    started_at: float = field(default_factory=time.time)
