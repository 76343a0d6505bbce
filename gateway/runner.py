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
from adapters.telegram import TelegramAdapter, TelegramSettings
from core.agent import Agent, MinimalAgent, TurnRequest
from core.llm import ModelClient, ModelSettings
from storage import AutoPruneSettings, StateStore, WriterSettings

from .auth import Authorizer
from .builtin_commands import register_builtin_commands
from .commands import CommandRegistry
from .config import ConfigError, LoadedConfig, TelegramConfig
from .dedupe import Dedupe
from .delivery import Delivery
from .lanes import Lanes
from .logs import register_secrets
from .router import AgentMaker, MemoryFlush, Router
from .services import Services
from .session_index import SessionIndex
from .session_key import SessionKeySettings

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


def default_agent_maker(client: ModelClient) -> AgentMaker:
    def make(services: Services, request: TurnRequest) -> Agent:
        return MinimalAgent(services.store, client)

    return make


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

    def __post_init__(self) -> None:
        self._stop = asyncio.Event()
        self.adapter_states: dict[str, AdapterState] = {}
        self.services: Services | None = None
        self.router: Router | None = None
        self.http_port: int | None = None

    def request_stop(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------------ set-up

    def _build_adapters(self) -> dict[str, Adapter]:
        adapters: dict[str, Adapter] = {}
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
        values += [v for k, v in self.config.env.items() if k.endswith(("_TOKEN", "_KEY", "_SECRET"))]
        return values

    async def _start_http(self, adapters: dict[str, Adapter]) -> web.AppRunner:
        app = web.Application(client_max_size=2 * 1024 * 1024)
        app.router.add_get("/healthz", self._healthz)
        for adapter in adapters.values():
            add_routes = getattr(adapter, "add_routes", None)
            if add_routes is not None:
                add_routes(app)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
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

    async def _healthz(self, request: web.Request) -> web.Response:
        states = {name: st.state for name, st in self.adapter_states.items()}
        degraded = any(s != "connected" for s in states.values())
        status = "stopping" if self._stop.is_set() else ("degraded" if degraded else "ok")
        body: dict[str, object] = {"status": status, "adapters": states}
        if self.services is not None:
            w = self.services.store.writer.stats
            body["storage"] = {"queue_depth": w.queue_depth, "commits": w.commits, "busy_retries": w.busy_retries}
            body["turns"] = {"running": self.services.lanes.running, "waiting": self.services.lanes.total_waiting}
        return web.json_response(body, status=200 if status == "ok" else 503)

    # ------------------------------------------------------------------- serve

    async def run(self) -> None:
        """Serve until asked to stop. Raises ConfigError / StorageLockedError on a bad start."""
        settings = self.config.settings
        register_secrets(self._secrets())
        log.info("gateway.starting", home=str(self.config.home), sqlite_version=sqlite3.sqlite_version)
        store = StateStore(self.config.db_path, writer_settings=writer_settings(self.config))
        await store.open()
        client: ModelClient | None = None
        http: web.AppRunner | None = None
        try:
            s = settings.sessions
            await store.maybe_auto_prune(
                AutoPruneSettings(s.auto_prune, s.retention_days, s.vacuum_after_prune, s.min_interval_hours)
            )
            adapters = self._build_adapters()
            client = ModelClient(model_settings(self.config))
            registry = CommandRegistry()
            register_builtin_commands(registry)
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
            authorizer = Authorizer(self.config, adapters)
            authorizer.warn_if_closed()
            if not client.settings.configured:
                log.warning("model.not_configured", hint="set model.base_url and model.default in config.yaml")
            router = Router(
                services,
                authorizer,
                SessionKeySettings(
                    group_sessions_per_user=settings.gateway.group_sessions_per_user,
                    thread_sessions_per_user=settings.gateway.thread_sessions_per_user,
                ),
                self.agent_maker(client),
                memory_flush=self.memory_flush,
            )
            self.router = router
            for adapter in adapters.values():
                adapter.bind(router.handle)
            http = await self._start_http(adapters)
            await self._serve(adapters, services, router)
        finally:
            if http is not None:
                await http.cleanup()
            if client is not None:
                await client.aclose()
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
                log.info("gateway.ready", adapters=sorted(adapters))
                await self._stop.wait()
                log.info("gateway.stopping", running_turns=services.lanes.running,
                         waiting=services.lanes.total_waiting)
                router.stop_intake()
                cut = await services.lanes.drain(self.config.settings.gateway.drain_timeout)
                if cut:
                    log.warning("gateway.drain_cut", turns=cut)
                for adapter in adapters.values():
                    with contextlib.suppress(Exception):
                        await adapter.disconnect()
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
