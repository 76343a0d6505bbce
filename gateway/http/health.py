"""What the daemon says about itself: /healthz, /readyz, /metrics and gateway.state.json.

- ``/healthz``: liveness only. 200 while the event loop answers (the handler
  runs on that loop) and the daemon is not stopping, whatever the platforms
  do: container health checks and orchestrators restart on it, and a restart
  does not bring back a Telegram outage. The body lists adapter states and
  counters, nothing sensitive: it is open to anyone who reaches the port.
- ``/readyz``: storage takes a write, and every enabled adapter is *live* by
  inbound liveness: an adapter that can tell (``adapter.health`` and
  ``adapter.health_reason``, e.g. Telegram's getUpdates watchdog) says so
  itself; otherwise the runner's supervision state decides. Per adapter:
  ``starting | live | degraded | failed`` with a reason. The storage probe
  is shared by concurrent requests and reused for ``STORAGE_PROBE_TTL``
  seconds, so a flood of probes cannot load the writer.
- ``/metrics``: Prometheus text from ``GatewayMetrics``.
- ``/readyz`` and ``/metrics`` need ``Authorization: Bearer <API_SERVER_KEY>``
  when the server listens beyond loopback and a key is set.
- ``gateway.state.json`` in the home, rewritten atomically every few seconds,
  for ``hermes-gateway status`` when the control socket is not there; the
  control socket's ``status`` answers with the same ``status_snapshot``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import structlog
from aiohttp import web

from gateway.config import LoadedConfig
from gateway.daemon.sdnotify import SdNotifier
from gateway.logs import redact
from gateway.routing.metrics import CONTENT_TYPE, GatewayMetrics
from gateway.routing.services import Services

__all__ = [
    "STATE_FILE",
    "AdapterReadiness",
    "HealthSource",
    "StatePublisher",
    "adapter_readiness",
    "add_health_routes",
    "read_state_file",
    "status_snapshot",
]

log = structlog.get_logger("hermes.health")

STATE_FILE = "gateway.state.json"
PUBLISH_INTERVAL = 2.0
STORAGE_PROBE_TIMEOUT = 5.0
#: how long /readyz reuses a storage probe's answer
STORAGE_PROBE_TTL = 2.0
#: the longest the daemon waits for its adapters before telling systemd it is ready anyway
READY_WAIT = 30.0
READY_POLL = 0.05
CHANGE_POLL = 0.5
READINESS_STATES = ("starting", "live", "degraded", "failed")


class AdapterStateLike(Protocol):
    name: str
    state: str
    restarts: int
    last_error: str | None


class SnapshotSource(Protocol):
    """What a status snapshot needs (the control socket's view of the ``Gateway`` is no more than this)."""

    adapter_states: dict[str, Any]
    @property
    def services(self) -> Services | None: ...


class HealthSource(SnapshotSource, Protocol):
    """The part of the runner's ``Gateway`` that health reads."""

    config: LoadedConfig
    metrics: GatewayMetrics
    http_port: int | None

    @property
    def stopping(self) -> bool: ...


@dataclass(frozen=True)
class AdapterReadiness:
    state: str  # starting | live | degraded | failed
    reason: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {"state": self.state, "reason": redact(self.reason) if self.reason else None}


def adapter_readiness(supervised: AdapterStateLike, adapter: object | None) -> AdapterReadiness:
    """One adapter's readiness from the runner's view and the adapter's own, if it has one."""
    if supervised.state == "failed":
        return AdapterReadiness("failed", supervised.last_error or "the adapter gave up")
    if supervised.state == "stopped":
        return AdapterReadiness("failed", "stopped")
    if supervised.state == "restarting":
        return AdapterReadiness("degraded", f"reconnecting after: {supervised.last_error or 'a failure'}")
    if supervised.state != "connected":
        return AdapterReadiness("starting", "connecting")
    own = getattr(adapter, "health", None)
    reason = getattr(adapter, "health_reason", None)
    if isinstance(own, str) and own in READINESS_STATES:
        return AdapterReadiness(own, reason if isinstance(reason, str) else None)
    return AdapterReadiness("live")


def _adapters_readiness(src: SnapshotSource) -> dict[str, AdapterReadiness]:
    adapters = src.services.adapters if src.services is not None else {}
    return {name: adapter_readiness(st, adapters.get(name)) for name, st in sorted(src.adapter_states.items())}


async def _storage_readiness(src: HealthSource) -> AdapterReadiness:
    if src.services is None:
        return AdapterReadiness("starting", "opening state.db")
    try:
        # An empty transaction still takes the write lock (BEGIN IMMEDIATE) through the writer task.
        await asyncio.wait_for(src.services.store.write(lambda conn: None), STORAGE_PROBE_TIMEOUT)
    except TimeoutError:
        return AdapterReadiness("degraded", f"a write did not commit within {STORAGE_PROBE_TIMEOUT:g}s")
    except Exception as exc:
        return AdapterReadiness("failed", f"{type(exc).__name__}: {exc}")
    return AdapterReadiness("live")


class _StorageProbe:
    """/readyz's storage check: one write probe at a time, its answer reused for ``STORAGE_PROBE_TTL``."""

    def __init__(self, src: HealthSource) -> None:
        self._src = src
        self._task: asyncio.Task[tuple[AdapterReadiness, float]] | None = None
        self._result: tuple[AdapterReadiness, float] | None = None
        self._at = -math.inf

    async def result(self) -> tuple[AdapterReadiness, float]:
        """The storage readiness and when (epoch seconds) it was checked."""
        loop = asyncio.get_running_loop()
        if self._result is not None and loop.time() - self._at < STORAGE_PROBE_TTL:
            return self._result
        if self._task is None:
            self._task = asyncio.create_task(self._probe(), name="readyz-storage-probe")
        # Shielded: a client that hangs up must not cancel the probe others are waiting for.
        return await asyncio.shield(self._task)

    async def _probe(self) -> tuple[AdapterReadiness, float]:
        try:
            result = (await _storage_readiness(self._src), time.time())
        finally:
            self._task = None
        if self._src.services is not None:  # "opening state.db" is free to ask again
            self._result, self._at = result, asyncio.get_running_loop().time()
        return result


def _healthz_body(src: HealthSource) -> tuple[int, dict[str, object]]:
    # Liveness only: adapter states are listed for people, they never fail the check.
    status = "stopping" if src.stopping else "ok"
    body: dict[str, object] = {"status": status,
                               "adapters": {name: st.state for name, st in sorted(src.adapter_states.items())}}
    if src.services is not None:
        w = src.services.store.writer.stats
        body["storage"] = {"queue_depth": w.queue_depth, "commits": w.commits, "busy_retries": w.busy_retries}
        body["turns"] = {"running": src.services.lanes.running, "waiting": src.services.lanes.total_waiting}
    return (200 if status == "ok" else 503), body


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # "" (every interface) or a name that may resolve anywhere


def _guard_key(config: LoadedConfig) -> str | None:
    """The bearer key /readyz and /metrics require: API_SERVER_KEY when the server is reachable from
    other machines; None (open) on loopback, where only this machine's users reach it."""
    api = config.settings.platforms.api_server
    if api.key is None or _is_loopback(api.host):
        return None
    return api.key.get_secret_value()


def _authorized(request: web.Request, key: str | None) -> bool:
    if key is None:
        return True
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), key.encode())


def _unauthorized() -> web.Response:
    return web.json_response({"error": "Missing or wrong bearer key (API_SERVER_KEY)."}, status=401,
                             headers={"WWW-Authenticate": "Bearer"})


def add_health_routes(app: web.Application, src: HealthSource) -> None:
    key = _guard_key(src.config)
    probe = _StorageProbe(src)

    async def healthz(request: web.Request) -> web.Response:
        code, body = _healthz_body(src)
        return web.json_response(body, status=code)

    async def readyz(request: web.Request) -> web.Response:
        if not _authorized(request, key):
            return _unauthorized()
        adapters = _adapters_readiness(src)
        storage, checked_at = await probe.result()
        ready = (not src.stopping and storage.state == "live"
                 and all(a.state == "live" for a in adapters.values()))
        body = {
            "status": "stopping" if src.stopping else ("ready" if ready else "not_ready"),
            "storage": {**storage.as_dict(), "checked_at": checked_at},
            "adapters": {name: a.as_dict() for name, a in adapters.items()},
        }
        return web.json_response(body, status=200 if ready else 503)

    async def metrics(request: web.Request) -> web.Response:
        if not _authorized(request, key):
            return _unauthorized()
        return web.Response(body=src.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)


# ----------------------------------------------------------------- state file


def _last_error(states: Mapping[str, AdapterStateLike]) -> str | None:
    errors = [f"{name}: {redact(st.last_error)}" for name, st in sorted(states.items()) if st.last_error]
    return errors[-1] if errors else None


class StatePublisher:
    """Writes ``gateway.state.json`` (mode 0600, atomically) while the daemon runs."""

    def __init__(self, home: Path, src: HealthSource, started_at: float | None = None) -> None:
        self.path = home / STATE_FILE
        self._src = src
        self.started_at = started_at or time.time()

    def snapshot(self, *, running: bool = True) -> dict[str, Any]:
        return status_snapshot(self._src, running=running, started_at=self.started_at)

    def write(self, *, running: bool = True) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        data = json.dumps(self.snapshot(running=running), indent=1, sort_keys=True).encode()
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except OSError as exc:
            log.warning("health.state_file_failed", path=str(self.path), error=str(exc))
            with contextlib.suppress(OSError):
                tmp.unlink()

    def status_line(self) -> str:
        adapters = ", ".join(f"{n} {a.state}" for n, a in _adapters_readiness(self._src).items()) or "none"
        services = self._src.services
        turns = f"; {services.lanes.running} turns running" if services is not None else ""
        return f"adapters: {adapters}{turns}"

    def _settled(self) -> bool:
        # Every adapter connected or given up: what systemd's READY=1 waits for.
        return all(st.state in ("connected", "failed") for st in self._src.adapter_states.values())

    async def run(self, notifier: SdNotifier | None = None, interval: float = PUBLISH_INTERVAL) -> None:
        """Refresh the file (and systemd's STATUS=) until cancelled; a last write marks it not running.

        READY=1 goes out once every adapter is up (or failed for good), or after
        ``READY_WAIT`` seconds at the latest: a platform that cannot be reached
        must not make systemd kill and restart a daemon that keeps retrying it.
        """
        loop = asyncio.get_running_loop()
        ready_by = loop.time() + READY_WAIT
        announced = False
        last_status = ""
        next_write = 0.0
        try:
            while True:
                now = loop.time()
                line = self.status_line()
                if now >= next_write or line != last_status:  # a change shows at once, not next round
                    self.write()
                    next_write = now + interval
                if not announced and (self._settled() or now >= ready_by):
                    announced = True
                    log.info("gateway.ready_notified", status=line)
                    if notifier is not None:
                        notifier.ready(line)
                elif announced and line != last_status and notifier is not None and not self._src.stopping:
                    notifier.status(line)
                last_status = line
                await asyncio.sleep(READY_POLL if not announced else min(interval, CHANGE_POLL))
        finally:
            self.write(running=False)


def status_snapshot(src: SnapshotSource, *, running: bool = True, started_at: float | None = None
                    ) -> dict[str, Any]:
    """What ``hermes-gateway status`` shows, from either source: the control socket answers with this,
    and ``gateway.state.json`` holds it. Adapter ``state``/``reason`` are readiness (as /readyz);
    ``supervision`` is the runner's own state."""
    readiness = _adapters_readiness(src)
    adapters = {
        name: {
            "supervision": st.state,
            "state": readiness[name].state,
            "reason": readiness[name].as_dict()["reason"],
            "restarts": st.restarts,
            "last_error": redact(st.last_error) if st.last_error else None,
        }
        for name, st in sorted(src.adapter_states.items())
    }
    services = src.services
    if services is not None:
        started_at = services.started_at
    now = time.time()
    body: dict[str, Any] = {
        "pid": os.getpid(),
        "running": running,
        # The control socket's view of the gateway does not declare these two; the runner's has them.
        "stopping": bool(getattr(src, "stopping", False)),
        "http_port": getattr(src, "http_port", None),
        "started_at": started_at,
        "uptime_seconds": round(now - started_at, 3) if started_at is not None else None,
        "updated_at": now,
        "adapters": adapters,
        "last_error": _last_error(src.adapter_states),
    }
    if services is not None:
        w = services.store.writer.stats
        body["turns"] = {"running": services.lanes.running, "waiting": services.lanes.total_waiting}
        body["storage"] = {"queue_depth": w.queue_depth, "commits": w.commits, "busy_retries": w.busy_retries}
        body["model"] = services.model_name
    return body


def read_state_file(home: Path) -> dict[str, Any] | None:
    """The last published state, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads((home / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
