"""The daemon: one process, one event loop, named tasks with explicit lifecycles.

Start: config -> state.db (single-writer lock, migrations) -> adapters, router,
HTTP server -> serve. SIGTERM/SIGINT: stop intake, let running turns finish
within ``gateway.drain_timeout``, stop adapters, drain the writer, TRUNCATE
checkpoint, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import structlog
from aiohttp import web

from adapters.base import Adapter, FatalAdapterError
from core.llm import ModelClient
from core.tools.terminal import kill_all_commands
from gateway.config import LoadedConfig
from gateway.control.server import ControlServer
from gateway.daemon.adapters import build_adapters, secrets_of
from gateway.daemon.agents import DefaultAgents
from gateway.daemon.build import Runtime, build_runtime, default_agent_maker
from gateway.daemon.publisher import StatePublisher
from gateway.daemon.sdnotify import SdNotifier
from gateway.daemon.settings import make_store, model_settings
from gateway.daemon.shutdown import disconnect_all
from gateway.daemon.transport import AiohttpTransport
from gateway.http import HttpServer, add_health_routes, start_http_server
from gateway.logs import register_secrets
from gateway.routing.metrics import GatewayMetrics
from gateway.routing.resets import MemoryFlush, Resets
from gateway.routing.restart import announce_back
from gateway.routing.router import Router
from gateway.routing.services import Services
from gateway.routing.turns import AgentMaker
from gateway.scheduler.clock import Clock
from gateway.userdata import userdata_of
from storage import AutoPruneSettings

if TYPE_CHECKING:
    from gateway.daemon.clustered import ClusterDuties

log = structlog.get_logger("hermes.runner")

ADAPTER_BACKOFF_MAX = 60.0


@dataclass
class AdapterState:
    name: str
    state: str = "starting"  # starting | connected | restarting | failed | stopped | standby (another node's role)
    restarts: int = 0
    last_error: str | None = None


@dataclass
class Gateway:
    config: LoadedConfig
    extra_adapters: dict[str, Adapter] = field(default_factory=dict)
    agent_maker: Callable[[ModelClient], AgentMaker] = default_agent_maker
    #: given one turn on a session that a reset policy is about to end, to
    #: save what is worth keeping (the agent's memory tools plug in here)
    memory_flush: MemoryFlush | None = None
    #: ``hermes-gateway chat --standalone``: only the terminal chat, no HTTP server
    standalone: bool = False
    #: False when the process is someone else's, who decides what SIGINT and SIGTERM mean
    #: (``chat --standalone``: Ctrl-C leaves the chat first, then stops this gateway)
    handle_signals: bool = True
    #: the scheduled jobs' clock (None: the wall clock); a test drives a fake one
    cron_clock: Clock | None = None

    def __post_init__(self) -> None:
        self._stop = asyncio.Event()
        self.adapter_states: dict[str, AdapterState] = {}
        #: the parts of this run, once it has started (``build_runtime``)
        self.runtime: Runtime | None = None
        self.http_port: int | None = None
        #: the HTTP server, once it listens (its connection counts are in /readyz)
        self.http_server: HttpServer | None = None
        self.metrics = GatewayMetrics()
        self.notifier = SdNotifier()
        #: on PostgreSQL: this node's part in the cluster (roles, lanes, the nodes for ``status``)
        self.cluster: ClusterDuties | None = None

    @property
    def cluster_view(self) -> dict[str, Any] | None:
        return self.cluster.view if self.cluster is not None else None

    @property
    def services(self) -> Services | None:
        return self.runtime.services if self.runtime is not None else None

    @property
    def router(self) -> Router | None:
        return self.runtime.router if self.runtime is not None else None

    def request_stop(self) -> None:
        self._stop.set()

    @property
    def restart_requested(self) -> bool:
        """This run stopped (or is stopping) for /restart: the caller brings the process back."""
        services = self.services
        return services is not None and services.restart is not None and services.restart.requested

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # ------------------------------------------------------------------- serve

    async def run(self) -> None:
        """Serve until asked to stop. Raises ConfigError / StorageLockedError on a bad start."""
        settings = self.config.settings
        register_secrets(secrets_of(self.config))
        for sig in (signal.SIGTERM, signal.SIGINT) if self.handle_signals else ():
            # From the first moment (before the first log line, which callers take as "started"):
            # a stop asked for during start-up becomes a clean drain once it is done.
            with contextlib.suppress(NotImplementedError, RuntimeError):
                asyncio.get_running_loop().add_signal_handler(sig, self.request_stop)
        url = self.config.storage_url
        log.info("gateway.starting", home=str(self.config.home), storage=url.redacted,
                 sqlite_version=sqlite3.sqlite_version)
        store = make_store(self.config)
        await store.open()
        client: ModelClient | None = None
        agents: AgentMaker | None = None
        http: HttpServer | None = None
        control: ControlServer | None = None
        try:
            s = settings.sessions
            await store.maybe_auto_prune(
                AutoPruneSettings(s.auto_prune, s.retention_days, s.vacuum_after_prune, s.min_interval_hours)
            )
            adapters = build_adapters(self.config, standalone=self.standalone, extra=self.extra_adapters)
            client = ModelClient(model_settings(self.config), transport=AiohttpTransport())
            if not client.settings.configured:
                log.warning("model.not_configured", hint="set model.base_url and model.default in config.yaml")
            agents = self.agent_maker(client)
            runtime = build_runtime(self.config, store, adapters, agents, self.metrics,
                                    memory_flush=self.memory_flush, clock=self.cron_clock,
                                    # a standalone chat's gateway ends with its chat: it never restarts
                                    request_stop=None if self.standalone else self.request_stop)
            self.runtime = runtime
            if runtime.services.pairing is not None:  # who pairing let in, and the owners it recorded
                await runtime.services.pairing.load()
            runtime.authorizer.warn_if_closed()
            if runtime.services.mcp is not None:
                await runtime.services.mcp.start()  # in the background: readiness never waits for a server
            if self.config.storage_url.backend != "sqlite":
                from gateway.daemon.clustered import ClusterDuties  # it loads the PostgreSQL driver

                self.cluster = ClusterDuties(
                    self.config, store, runtime, adapters,  # type: ignore[arg-type]  # a PgStore here
                    supervise=lambda name: self._supervise(name, adapters[name], runtime.services),
                    standby=self._standby, sweeper=lambda: self._sweeper(runtime.services, runtime.turns.resets))
            # what a previous process left cut off; on a cluster only while no other node runs (it
            # could be that node's work under way)
            alone = self.cluster is None or not await self.cluster.others_alive()
            if alone:
                await runtime.handoffs.recover()
            await _finish_forgets(runtime.services)  # a forget a crash cut off after its commit
            if alone:
                await runtime.turns.background.recover()  # /bg tasks a crash cut off: their chats are told
            if runtime.scheduler is not None and self.cluster is None:  # on a cluster: its role's holder
                await runtime.scheduler.start()  # its runs wait for their platform to connect
            self.metrics.attach(store, runtime.services.lanes, self.adapter_states, adapters)
            for adapter in adapters.values():
                adapter.bind(runtime.router.handle)
            # what a crash or a stop cut off, ahead of anything the platforms bring from now on
            if replayed := await runtime.router.replay():
                log.info("gateway.parked_taken_again", messages=replayed)
            if not self.standalone:
                http = self.http_server = await start_http_server(self.config, self._routes(adapters))
                self.http_port = http.port
            control = ControlServer(self.config.home, self)
            await control.start()
            await self._serve(adapters, runtime)
        finally:
            if self.runtime is not None and self.runtime.menus is not None:
                await self.runtime.menus.aclose()
            if self.runtime is not None and self.runtime.scheduler is not None:
                await self.runtime.scheduler.stop()  # a run stopped here is retried once at the next start
            if self.cluster is not None:
                await self.cluster.stop()
            if control is not None:
                await control.stop()
            if http is not None:
                await http.close()
            if self.runtime is not None:
                await self.runtime.turns.background.aclose()
                await self.runtime.turns.resets.aclose()  # flushes before a reset use the store and the model
            if isinstance(agents, DefaultAgents):
                await agents.aclose()  # background reviews and titles, before their store closes
            if self.runtime is not None and self.runtime.services.mcp is not None:
                await self.runtime.services.mcp.aclose()  # stdio children terminated, then killed
            if client is not None:
                await client.aclose()
            if self.runtime is not None and (data := userdata_of(self.runtime.services)) is not None:
                await data.aclose()  # a VACUUM under way, before the writer stops
            if self.runtime is not None and self.runtime.services.media is not None:
                await self.runtime.services.media.aclose()
            if self.runtime is not None:
                await self.runtime.router.aclose()  # parked rows and dedupe records of jobs that ended
                await self.runtime.services.delivery.aclose()  # ledger notes of replies already sent
            await store.close()
            self.notifier.close()
            gc.unfreeze()
            log.info("gateway.stopped")

    def _routes(self, adapters: dict[str, Adapter]) -> list[Callable[[web.Application], None]]:
        routes: list[Callable[[web.Application], None]] = [lambda app: add_health_routes(app, self)]
        for adapter in adapters.values():
            add_routes = getattr(adapter, "add_routes", None)
            if add_routes is not None:
                routes.append(add_routes)
        return routes

    async def _serve(self, adapters: dict[str, Adapter], runtime: Runtime) -> None:
        services, router = runtime.services, runtime.router
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if self.handle_signals else ()
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_stop)
        try:
            async with anyio.create_task_group() as tg:
                cluster = self.cluster
                for name, adapter in adapters.items():
                    self.adapter_states[name] = AdapterState(name)
                    if cluster is not None and name in cluster.adapter_roles:
                        self._standby(name)  # connected by the node that holds its role
                    else:
                        tg.start_soon(self._supervise, name, adapter, services, name=f"adapter:{name}")
                if cluster is None:
                    tg.start_soon(self._sweeper, services, runtime.turns.resets, name="sweeper")
                else:
                    await cluster.start()  # its roles start their pollers and loops
                tg.start_soon(self.notifier.watchdog, name="sd-watchdog")
                if not self.standalone:  # a terminal chat without the daemon publishes nothing
                    publisher = StatePublisher(self.config.home, self, services.started_at)
                    tg.start_soon(publisher.run, self.notifier, name="state-publisher")
                # What start-up built (modules, clients, the runtime) lives as long as the process: out of
                # the collector's sight, a full collection walks only what serving creates. Under a flood
                # of connections those collections had paused the loop for 100-500 ms. The stop hands it
                # all back to the collector (for a daemon run inside a longer process, as in tests).
                gc.freeze()
                log.info("gateway.ready", adapters=sorted(adapters))
                await self._stop.wait()
                log.info("gateway.stopping", running_turns=services.lanes.running,
                         waiting=services.lanes.total_waiting)
                self.notifier.stopping(f"draining: {services.lanes.running} turns running")
                if self.cluster is not None:
                    self.cluster.stopping = True
                router.stop_intake()
                drain = self.config.settings.gateway.drain_timeout
                # Runs under way end within the same drain as the turns (then are retried at the next start).
                cron_stop = asyncio.create_task(runtime.scheduler.stop(drain)) if runtime.scheduler else None
                # Nobody can answer a question now (intake is closed): they end as a no, not by the drain's cut.
                services.approvals.stop()
                cut = await services.lanes.drain(drain)
                if cron_stop is not None:
                    await cron_stop
                if cluster is not None:
                    await cluster.stop()  # its roles and chats go to the other nodes at once
                if cut:
                    log.warning("gateway.drain_cut", turns=cut)
                # A cut turn's command was killed with it; this takes whatever is left (no orphans).
                if killed := await kill_all_commands():
                    log.warning("gateway.commands_killed", groups=killed)
                await runtime.handoffs.aclose()
                # Together, under one bound: what follows (writer drain, TRUNCATE) must fit TimeoutStopSec.
                await disconnect_all(adapters, self.config.settings.gateway.disconnect_timeout)
                tg.cancel_scope.cancel()
        finally:
            for sig in signals:
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)

    async def _supervise(self, name: str, adapter: Adapter, services: Services) -> None:
        """Run one adapter; restart it with backoff when it fails. Others are unaffected."""
        state = self.adapter_states[name]
        backoff = 1.0
        while not self._stop.is_set():
            adapter.ready.clear()  # "connected" must come from this attempt
            recovery = asyncio.create_task(self._recover_when_ready(name, adapter, services))
            try:
                await adapter.connect()
                if self._stop.is_set():
                    break
                raise ConnectionError("adapter stopped on its own")
            except FatalAdapterError as exc:
                state.state, state.last_error = "failed", str(exc)
                log.error("adapter.fatal", adapter=name, error=str(exc))
                return
            except Exception as exc:
                if adapter.ready.is_set():
                    backoff = 1.0  # it had connected: this is a fresh failure, not a failing start
                state.state, state.last_error = "restarting", f"{type(exc).__name__}: {exc}"
                state.restarts += 1
                log.error("adapter.crashed", adapter=name, error=state.last_error, retry_in=backoff)
                with contextlib.suppress(Exception):
                    await adapter.disconnect()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, ADAPTER_BACKOFF_MAX)
            finally:
                recovery.cancel()
        state.state = "stopped"

    def _standby(self, name: str) -> None:
        self.adapter_states[name].state = "standby"

    async def _recover_when_ready(self, name: str, adapter: Adapter, services: Services) -> None:
        await adapter.ready.wait()
        self.adapter_states[name].state = "connected"
        minutes = self.config.settings.gateway.delivery_recovery_minutes
        try:
            if self.cluster is None:  # on a cluster the ledger's role holder recovers, for every node
                await services.delivery.recover(name, minutes * 60)
        except Exception:
            log.exception("delivery.recovery_failed", adapter=name)
        try:  # a /restart asked in a chat of this platform: "back", once
            await announce_back(services.store, services.delivery, name)
        except Exception:
            log.exception("restart.back_failed", adapter=name)
        if self.runtime is not None and self.runtime.menus is not None:
            await self.runtime.menus.register(name)

    async def _sweeper(self, services: Services, resets: Resets) -> None:
        interval = self.config.settings.gateway.sweep_interval_seconds
        while True:
            await asyncio.sleep(interval)
            try:
                swept = await services.dedupe.sweep()
                if swept:
                    log.info("sweeper.dedupe", removed=swept)
            except Exception:
                log.exception("sweeper.failed")
            try:
                # Automatic resets are decided here, when due, not on the chat's next message.
                await resets.sweep()
            except Exception:
                log.exception("sweeper.resets_failed")
            if services.media is not None:
                try:
                    await services.media.pruner.run()
                except Exception:
                    log.exception("sweeper.media_failed")


async def _finish_forgets(services: Services) -> None:
    data = userdata_of(services)
    if data is None:
        return
    try:
        await data.forgetter.resume()
    except Exception:  # tried again at the next start; the rows are gone already
        log.exception("userdata.forget_resume_failed")
