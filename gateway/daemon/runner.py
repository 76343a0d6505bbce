"""The daemon: one process, one event loop, named tasks with explicit lifecycles.

Start: config -> state.db (single-writer lock, migrations) -> adapters, router,
HTTP server -> serve. SIGTERM/SIGINT: stop intake, let running turns finish
within ``gateway.drain_timeout``, stop adapters, drain the writer, TRUNCATE
checkpoint, exit 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import signal
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import structlog
from aiohttp import web

from adapters.api_server import ApiServerAdapter
from adapters.base import Adapter, FatalAdapterError
from adapters.cli import CliAdapter
from adapters.discord import DiscordAdapter, DiscordSettings
from adapters.slack import SlackAdapter, SlackSettings
from adapters.telegram import TelegramAdapter, TelegramSettings
from core import AgentRuntime, AgentSettings
from core.agent import Agent, TurnRequest
from core.llm import ModelClient, ModelSettings
from core.tools import ToolsetPolicy
from gateway.commands.builtin import register_builtin_commands
from gateway.commands.families import register_chat_commands
from gateway.config.models import ConfigError, DiscordConfig, LoadedConfig, SlackConfig, TelegramConfig
from gateway.control.server import ControlServer
from gateway.daemon.sdnotify import SdNotifier
from gateway.daemon.shutdown import disconnect_all
from gateway.daemon.transport import AiohttpTransport
from gateway.handoff.runner import HandoffRunner
from gateway.http.health import StatePublisher, add_health_routes
from gateway.logs import register_secrets
from gateway.routing.auth import Authorizer
from gateway.routing.commands import CommandRegistry
from gateway.routing.dedupe import Dedupe
from gateway.routing.delivery import Delivery
from gateway.routing.home_channels import HomeChannels
from gateway.routing.lanes import Lanes
from gateway.routing.metrics import GatewayMetrics
from gateway.routing.router import AgentMaker, MemoryFlush, Router
from gateway.routing.services import Services
from gateway.routing.session_index import SessionIndex
from gateway.routing.session_key import SessionKeySettings
from storage import AutoPruneSettings, StateStore, WriterSettings

log = structlog.get_logger("hermes.runner")

ADAPTER_BACKOFF_MAX = 60.0


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def writer_settings(config: LoadedConfig) -> WriterSettings:
    s = config.settings.storage
    return WriterSettings(
        batch_limit=s.batch_limit,
        queue_limit=s.queue_limit,
        checkpoint_every_commits=s.checkpoint_every_commits,
        checkpoint_every_seconds=s.checkpoint_every_seconds,
        busy_retry_budget=s.busy_retry_budget,
        synchronous=s.synchronous,
    )


def model_settings(config: LoadedConfig) -> ModelSettings:
    m = config.settings.model
    return ModelSettings(
        base_url=m.base_url,
        api_key=m.api_key.get_secret_value() if m.api_key else None,
        model=m.default,
        auxiliary_model=m.auxiliary,
        timeout=m.timeout,
        max_retries=m.max_retries,
        max_retry_after=m.max_retry_after,
    )


def telegram_settings(tg: TelegramConfig) -> TelegramSettings:
    """The adapter's settings from ``platforms.telegram`` (already validated by the config)."""
    if tg.token is None:  # pragma: no cover - TelegramConfig refuses an active section without one
        raise ConfigError("platforms.telegram is enabled but TELEGRAM_BOT_TOKEN is not set")
    return TelegramSettings(
        token=tg.token.get_secret_value().strip(),
        base_url=tg.base_url,
        base_file_url=tg.base_file_url,
        mode=tg.mode,
        webhook_url=tg.webhook_url,
        webhook_path=tg.webhook_path,
        webhook_secret=tg.webhook_secret.get_secret_value() if tg.webhook_secret else None,
        require_mention=tg.require_mention,
        poll_timeout=tg.poll_timeout,
        watchdog_grace=tg.watchdog_grace,
        conflict_retries=tg.conflict_retries,
        conflict_backoff=tg.conflict_backoff,
        max_flood_wait=tg.max_flood_wait,
    )


def slack_settings(sl: SlackConfig) -> SlackSettings:
    """The adapter's settings from ``platforms.slack`` (already validated by the config)."""
    if sl.bot_token is None:  # pragma: no cover - SlackConfig refuses an active section without one
        raise ConfigError("platforms.slack is enabled but SLACK_BOT_TOKEN is not set")
    return SlackSettings(
        bot_token=sl.bot_token.get_secret_value().strip(),
        app_token=sl.app_token.get_secret_value().strip() if sl.app_token else None,
        signing_secret=sl.signing_secret.get_secret_value().strip() if sl.signing_secret else None,
        mode=sl.mode,
        api_base_url=sl.api_base_url,
        events_path=sl.events_path,
        free_response_channels=frozenset(sl.free_response_channels),
        ping_interval=sl.ping_interval,
        rate_limit_retries=sl.rate_limit_retries,
        thinking_placeholder=sl.thinking_placeholder,
        thinking_delay=sl.thinking_delay,
    )


def agent_settings(config: LoadedConfig) -> AgentSettings:
    a = config.settings.agent
    return AgentSettings(
        max_iterations=a.max_iterations,
        context_length=config.settings.model.context_length,
        compression_threshold=a.compression_threshold,
        tail_tokens=a.tail_tokens,
        memory_nudge_interval=a.memory_nudge_interval,
        skill_nudge_interval=a.skill_nudge_interval,
        review_max_iterations=a.review_max_iterations,
        auto_title=a.auto_title,
        toolsets={
            platform: ToolsetPolicy(frozenset(t.enabled) if t.enabled is not None else None, frozenset(t.disabled))
            for platform, t in a.toolsets.items()
        },
    )


class DefaultAgents:
    """The full agent of ``core``: one runtime per daemon run, a fresh agent per message.

    Also the daemon's compressor (/compress) and its memory flush before a reset.
    """

    def __init__(self, client: ModelClient) -> None:
        self._client = client
        self._runtime: AgentRuntime | None = None

    def runtime(self, services: Services) -> AgentRuntime:
        if self._runtime is None:
            from gateway.routing.session_index import rebind_in_transaction

            # The chat's key moves in the same transaction as a compression split.
            self._runtime = AgentRuntime(
                services.store, self._client, agent_settings(services.config), home=services.config.home,
                rebind_op=rebind_in_transaction,
            )
        return self._runtime

    def __call__(self, services: Services, request: TurnRequest) -> Agent:
        return self.runtime(services).agent(request)

    async def memory_flush(self, services: Services, session_id: str) -> None:
        await self.runtime(services).memory_flush(session_id)

    async def compress(self, services: Services, session_key: str, session_id: str) -> str:
        return (await self.runtime(services).compress(session_key, session_id)).reply

    async def aclose(self) -> None:
        if self._runtime is not None:
            await self._runtime.aclose()


def discord_settings(dc: DiscordConfig) -> DiscordSettings:
    """The adapter's settings from ``platforms.discord`` (already validated by the config)."""
    if dc.token is None:  # pragma: no cover - DiscordConfig refuses an active section without one
        raise ConfigError("platforms.discord is enabled but DISCORD_BOT_TOKEN is not set")
    return DiscordSettings(
        token=dc.token.get_secret_value().strip(),
        base_url=dc.base_url,
        gateway_url=dc.gateway_url,
        require_mention=dc.require_mention,
        free_response_channels=frozenset(dc.free_response_channels),
        auto_thread=dc.auto_thread,
        guild_ready_timeout=dc.guild_ready_timeout,
        heartbeat_timeout=dc.heartbeat_timeout,
        identify_delay=dc.identify_delay,
        catchup_limit=dc.catchup_limit,
    )


def default_agent_maker(client: ModelClient) -> AgentMaker:
    return DefaultAgents(client)


@dataclass
class AdapterState:
    name: str
    state: str = "starting"  # starting | connected | restarting | failed | stopped
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

    def __post_init__(self) -> None:
        self._stop = asyncio.Event()
        self.adapter_states: dict[str, AdapterState] = {}
        self.services: Services | None = None
        self.router: Router | None = None
        self.http_port: int | None = None
        self.metrics = GatewayMetrics()
        self.notifier = SdNotifier()

    def request_stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # ------------------------------------------------------------------ set-up

    def _build_adapters(self) -> dict[str, Adapter]:
        adapters: dict[str, Adapter] = {"cli": CliAdapter()}  # the terminal chat, always on
        if self.standalone:
            return adapters
        api = self.config.settings.platforms.api_server
        if api.enabled:
            key = api.key.get_secret_value() if api.key else None
            if not _is_loopback(api.host) and not key:
                raise ConfigError(
                    f"platforms.api_server.host is {api.host}, which is reachable from other machines; "
                    f"set API_SERVER_KEY (or platforms.api_server.key in {self.config.config_file}) first."
                )
            adapters["api-server"] = ApiServerAdapter(
                key=key, model_name=self.config.settings.model.default or "hermes-gateway"
            )
        telegram = self.config.settings.platforms.telegram
        if telegram.active:
            adapters["telegram"] = TelegramAdapter(telegram_settings(telegram))
        slack = self.config.settings.platforms.slack
        if slack.active:
            adapters["slack"] = SlackAdapter(slack_settings(slack))
        discord = self.config.settings.platforms.discord
        if discord.active:
            adapters["discord"] = DiscordAdapter(discord_settings(discord))
        adapters.update(self.extra_adapters)
        return adapters

    def _secrets(self) -> list[str | None]:
        s = self.config.settings
        tg = s.platforms.telegram
        values: list[str | None] = [
            s.model.api_key.get_secret_value() if s.model.api_key else None,
            s.platforms.api_server.key.get_secret_value() if s.platforms.api_server.key else None,
            tg.token.get_secret_value() if tg.token else None,
            tg.webhook_secret.get_secret_value() if tg.webhook_secret else None,
        ]
        sl = s.platforms.slack
        values += [v.get_secret_value() for v in (sl.bot_token, sl.app_token, sl.signing_secret) if v]
        dc = s.platforms.discord
        values += [dc.token.get_secret_value()] if dc.token else []
        values += [v for k, v in self.config.env.items() if k.endswith(("_TOKEN", "_KEY", "_SECRET"))]
        return values

    async def _start_http(self, adapters: dict[str, Adapter]) -> web.AppRunner:
        app = web.Application(client_max_size=2 * 1024 * 1024)
        add_health_routes(app, self)
        for adapter in adapters.values():
            add_routes = getattr(adapter, "add_routes", None)
            if add_routes is not None:
                add_routes(app)
        # Open requests get 5 s at shutdown (aiohttp waits 60 by default): the stop has a bound to keep.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5.0)
        await runner.setup()
        api = self.config.settings.platforms.api_server
        site = web.TCPSite(runner, api.host, api.port)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"cannot listen on {api.host}:{api.port} ({exc.strerror or exc}); another program uses it. "
                f"Change platforms.api_server.port in {self.config.config_file}."
            ) from None
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        self.http_port = sockets[0].getsockname()[1] if sockets else api.port
        log.info("http.listening", host=api.host, port=self.http_port)
        return runner

    # ------------------------------------------------------------------- serve

    async def run(self) -> None:
        """Serve until asked to stop. Raises ConfigError / StorageLockedError on a bad start."""
        settings = self.config.settings
        register_secrets(self._secrets())
        for sig in (signal.SIGTERM, signal.SIGINT):
            # From the first moment (before the first log line, which callers take as "started"):
            # a stop asked for during start-up becomes a clean drain once it is done.
            with contextlib.suppress(NotImplementedError, RuntimeError):
                asyncio.get_running_loop().add_signal_handler(sig, self.request_stop)
        log.info("gateway.starting", home=str(self.config.home), sqlite_version=sqlite3.sqlite_version)
        store = StateStore(self.config.db_path, writer_settings=writer_settings(self.config))
        await store.open()
        client: ModelClient | None = None
        agents: AgentMaker | None = None
        http: web.AppRunner | None = None
        control: ControlServer | None = None
        try:
            s = settings.sessions
            await store.maybe_auto_prune(
                AutoPruneSettings(s.auto_prune, s.retention_days, s.vacuum_after_prune, s.min_interval_hours)
            )
            adapters = self._build_adapters()
            client = ModelClient(model_settings(self.config), transport=AiohttpTransport())
            registry = CommandRegistry()
            register_builtin_commands(registry)
            register_chat_commands(registry)
            lanes = Lanes(settings.gateway.max_concurrent_turns, settings.gateway.max_queued_per_session)
            services = Services(
                config=self.config,
                store=store,
                index=SessionIndex(store, settings.session_reset),
                dedupe=Dedupe(store, settings.gateway.dedupe_retention_hours),
                lanes=lanes,
                delivery=Delivery(store, adapters),
                adapters=adapters,
                commands=registry,
                model_name=settings.model.default,
            )
            self.services = services
            # The terminal chat is authenticated by its 0600 socket; it has no allowlist to warn about.
            authorizer = Authorizer(self.config, [p for p in adapters if p != "cli"])
            authorizer.warn_if_closed()
            if not client.settings.configured:
                log.warning("model.not_configured", hint="set model.base_url and model.default in config.yaml")
            services.key_settings = SessionKeySettings(
                group_sessions_per_user=settings.gateway.group_sessions_per_user,
                thread_sessions_per_user=settings.gateway.thread_sessions_per_user,
            )
            agents = self.agent_maker(client)
            memory_flush = self.memory_flush
            if isinstance(agents, DefaultAgents):
                services.compressor = agents
                memory_flush = memory_flush or agents.memory_flush
            router = Router(
                services,
                authorizer,
                services.key_settings,
                agents,
                memory_flush=memory_flush,
            )
            self.router = router
            services.home_channels = HomeChannels(store)
            services.handoffs = HandoffRunner(
                services, router.run_turn_in_lane, timeout=settings.sessions.handoff_timeout_seconds
            )
            await services.handoffs.recover()
            router.metrics = services.delivery.metrics = self.metrics
            self.metrics.attach(store, lanes, self.adapter_states, adapters)
            for adapter in adapters.values():
                adapter.bind(router.handle)
            if not self.standalone:
                http = await self._start_http(adapters)
            control = ControlServer(self.config.home, self)
            await control.start()
            await self._serve(adapters, services, router)
        finally:
            if control is not None:
                await control.stop()
            if http is not None:
                await http.cleanup()
            if isinstance(agents, DefaultAgents):
                await agents.aclose()  # background reviews and titles, before their store closes
            if client is not None:
                await client.aclose()
            if self.services is not None:
                await self.services.delivery.aclose()  # ledger notes of replies already sent
            await store.close()
            log.info("gateway.stopped")

    async def _serve(self, adapters: dict[str, Adapter], services: Services, router: Router) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.request_stop)
        try:
            async with anyio.create_task_group() as tg:
                for name, adapter in adapters.items():
                    self.adapter_states[name] = AdapterState(name)
                    tg.start_soon(self._supervise, name, adapter, services, name=f"adapter:{name}")
                tg.start_soon(self._sweeper, services, name="sweeper")
                tg.start_soon(self.notifier.watchdog, name="sd-watchdog")
                if not self.standalone:  # a terminal chat without the daemon publishes nothing
                    publisher = StatePublisher(self.config.home, self, services.started_at)
                    tg.start_soon(publisher.run, self.notifier, name="state-publisher")
                log.info("gateway.ready", adapters=sorted(adapters))
                await self._stop.wait()
                log.info("gateway.stopping", running_turns=services.lanes.running,
                         waiting=services.lanes.total_waiting)
                self.notifier.stopping(f"draining: {services.lanes.running} turns running")
                router.stop_intake()
                cut = await services.lanes.drain(self.config.settings.gateway.drain_timeout)
                if cut:
                    log.warning("gateway.drain_cut", turns=cut)
                if services.handoffs is not None:
                    await services.handoffs.aclose()
                # Together, under one bound: what follows (writer drain, TRUNCATE) must fit TimeoutStopSec.
                await disconnect_all(adapters, self.config.settings.gateway.disconnect_timeout)
                tg.cancel_scope.cancel()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
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

    async def _recover_when_ready(self, name: str, adapter: Adapter, services: Services) -> None:
        await adapter.ready.wait()
        self.adapter_states[name].state = "connected"
        minutes = self.config.settings.gateway.delivery_recovery_minutes
        try:
            await services.delivery.recover(name, minutes * 60)
        except Exception:
            log.exception("delivery.recovery_failed", adapter=name)

    async def _sweeper(self, services: Services) -> None:
        interval = self.config.settings.gateway.sweep_interval_seconds
        while True:
            await asyncio.sleep(interval)
            try:
                swept = await services.dedupe.sweep()
                if swept:
                    log.info("sweeper.dedupe", removed=swept)
            except Exception:
                log.exception("sweeper.failed")
