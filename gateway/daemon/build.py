"""The runtime parts of one daemon run, built once and complete from the validated config.

Order matters only where one part is given to another: the shared ``Services``
first, then the turns that run in the lanes, the /handoff machinery that
queues turns, and the router in front of them all. Nothing is assigned to a
part after this function returns.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapters.base import Adapter
from core.llm import ModelClient
from core.tools.mcp import McpManager
from gateway.commands import SkillCommands, TurnCronPorts, register_all_commands
from gateway.commands.native import NativeMenus
from gateway.config import LoadedConfig, mcp_specs
from gateway.daemon.agents import DefaultAgents
from gateway.daemon.settings import key_settings
from gateway.handoff.runner import HandoffRunner
from gateway.media import build_media
from gateway.routing.approvals import Approvals
from gateway.routing.auth import Authorizer
from gateway.routing.commands import CommandRegistry
from gateway.routing.dedupe import Dedupe
from gateway.routing.delivery import Delivery
from gateway.routing.home_channels import HomeChannels
from gateway.routing.lanes import Lanes
from gateway.routing.metrics import GatewayMetrics
from gateway.routing.owners import Owners
from gateway.routing.pairing import PAIRING_KEY_FILE, Pairing
from gateway.routing.resets import MemoryFlush
from gateway.routing.restart import RestartSwitch
from gateway.routing.router import Router
from gateway.routing.services import Services
from gateway.routing.session_index import SessionIndex
from gateway.routing.turns import AgentMaker, Turns
from gateway.scheduler import Jobs
from gateway.scheduler.clock import Clock, SystemClock
from gateway.scheduler.run import RunStarter
from gateway.scheduler.scheduler import Scheduler
from gateway.userdata import UserData
from storage import MediaStore, Store


@dataclass(frozen=True)
class Runtime:
    services: Services
    authorizer: Authorizer
    commands: CommandRegistry
    turns: Turns
    handoffs: HandoffRunner
    router: Router
    agents: AgentMaker
    #: runs the scheduled jobs (None: cron.enabled is off); started and stopped by the daemon
    scheduler: Scheduler | None = None
    #: the commands in the platforms' own menus (set as each adapter connects)
    menus: NativeMenus | None = None


def build_runtime(config: LoadedConfig, store: Store, adapters: dict[str, Adapter], agents: AgentMaker,
                  metrics: GatewayMetrics, *, memory_flush: MemoryFlush | None = None,
                  clock: Clock | None = None, request_stop: Callable[[], None] | None = None) -> Runtime:
    """``request_stop``: how /restart stops this run (None: it cannot, as in tests without a daemon)."""
    settings = config.settings
    commands = CommandRegistry()
    register_all_commands(commands)
    skills = SkillCommands(config.home, commands, frozenset(n for n, v in config.env.items() if v))
    skills.scan()  # the start's one look (off no loop yet); later ones run on a thread
    default = agents if isinstance(agents, DefaultAgents) else None
    # One store of files for the daemon: what a turn holds, a sweep must see (storage.MediaStore).
    blobs = MediaStore(config.home / "media")
    homes = HomeChannels(store)
    clock = clock or SystemClock()
    jobs = (Jobs(store, settings.cron, adapters=adapters, home_channels=homes, clock=clock,
                 cross_user=settings.sessions.allow_cross_user_resume) if settings.cron.enabled else None)
    def account_of(platform: str) -> str | None:
        adapter = adapters.get(platform)
        return adapter.account_id if adapter is not None else None

    owners = Owners(settings.auth.owners, accounts=account_of)
    pairing = Pairing(store, owners, config.home / PAIRING_KEY_FILE, accounts=account_of, key=config.pairing_key)
    services = Services(
        config=config,
        store=store,
        index=SessionIndex(store, settings.session_reset),
        dedupe=Dedupe(store, settings.gateway.dedupe_retention_hours),
        lanes=Lanes(settings.gateway.max_concurrent_turns, settings.gateway.max_queued_per_session),
        delivery=Delivery(store, adapters, metrics, blobs=blobs),
        adapters=adapters,
        key_settings=key_settings(config),
        home_channels=homes,
        metrics=metrics,
        compressor=default,
        side_questions=default,
        mcp=_mcp_manager(config),
        tools=default,
        model_name=settings.model.default,
        media=build_media(config, store, blobs),
        approvals=Approvals(approvers=settings.tools.approvers, store=store, owners=owners),
        jobs=jobs,
        cron_ports=TurnCronPorts(),
        owners=owners,
        skill_commands=skills,
        restart=RestartSwitch(store, request_stop) if request_stop is not None else None,
        userdata=UserData(store, blobs, config.home, forgotten=pairing.forgotten),
        pairing=pairing,
    )
    if memory_flush is None and default is not None:
        memory_flush = default.memory_flush
    turns = Turns(services, agents, memory_flush=memory_flush)
    handoffs = HandoffRunner(services, turns.run_in_lane, timeout=settings.sessions.handoff_timeout_seconds)
    # The terminal chat is authenticated by its 0600 socket; it has no allowlist to warn about.
    authorizer = Authorizer(config, [p for p in adapters if p != "cli"], owners=owners, pairing=pairing)
    router = Router(services, authorizer, turns, commands, handoffs)
    scheduler = None
    if jobs is not None:
        runs = RunStarter(services, agents, max_failures=settings.cron.max_failures, settled=jobs.refresh)
        scheduler = Scheduler(jobs, runs, store, clock=clock, max_concurrent=settings.cron.max_concurrent,
                              metrics=metrics)
    menus = NativeMenus(commands, skills, adapters)
    return Runtime(services, authorizer, commands, turns, handoffs, router, agents, scheduler, menus)


def _mcp_manager(config: LoadedConfig) -> McpManager | None:
    """The MCP servers of this run (built here, started by the daemon once it serves)."""
    specs = mcp_specs(config.settings.mcp_servers, config.env)
    return McpManager(specs) if specs else None


def default_agent_maker(client: ModelClient) -> AgentMaker:
    return DefaultAgents(client)
