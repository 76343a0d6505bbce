"""What the daemon says about itself: /healthz, /readyz and /metrics.

- ``/healthz``: liveness only. 200 while the event loop answers (the handler
  runs on that loop) and the daemon is not stopping, whatever the platforms
  do: container health checks and orchestrators restart on it, and a restart
  does not bring back a Telegram outage. The body lists adapter states and
  counters, nothing sensitive: it is open to anyone who reaches the port.
- ``/readyz``: storage takes a write, no write failed for want of disk in the last
  ``DISK_FAULT_HOLD`` seconds (full, I/O error, read-only: the writer's ``last_disk_fault``),
  the disk holding state.db has ``MIN_FREE_BYTES`` free, the daemon has at least
  ``LOW_HEADROOM`` of its file descriptors free (``fds``), and every enabled adapter is *live* by
  inbound liveness: an adapter that can tell (``adapter.health`` and
  ``adapter.health_reason``, e.g. Telegram's getUpdates watchdog) says so
  itself; otherwise the runner's supervision state decides. Per adapter:
  ``starting | live | degraded | failed`` with a reason. The storage probe
  is shared by concurrent requests and reused for ``STORAGE_PROBE_TTL``
  seconds, so a flood of probes cannot load the writer. The body also shows
  the HTTP server's open connections against ``max_connections``.
- ``/metrics``: Prometheus text from ``GatewayMetrics``.
- ``/readyz`` and ``/metrics`` need ``Authorization: Bearer <API_SERVER_KEY>``
  when the server listens beyond loopback and a key is set.
- ``gateway.state.json`` and ``status``: see ``gateway.status`` and ``gateway.daemon.publisher``.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import math
import os
import time
from pathlib import Path
from typing import Protocol

import structlog
from aiohttp import web

from gateway.config import LoadedConfig
from gateway.http.fds import LOW_HEADROOM, fd_usage
from gateway.http.server import HttpServer
from gateway.routing.metrics import CONTENT_TYPE, GatewayMetrics
from gateway.status import AdapterReadiness, SnapshotSource, adapters_readiness

__all__ = ["HealthSource", "add_health_routes"]

log = structlog.get_logger("hermes.health")

STORAGE_PROBE_TIMEOUT = 5.0
#: how long /readyz reuses a storage probe's answer
STORAGE_PROBE_TTL = 2.0
#: a write refused by the disk keeps the daemon not ready this long (small writes may still fit
#: while the next message will not; the free-space check tells when the disk has room again)
DISK_FAULT_HOLD = 60.0
#: less free space than this on state.db's filesystem: the next messages may not fit
MIN_FREE_BYTES = 16 * 1024 * 1024


class HealthSource(SnapshotSource, Protocol):
    """The part of the runner's ``Gateway`` that health reads."""

    config: LoadedConfig
    metrics: GatewayMetrics
    http_port: int | None
    http_server: HttpServer | None

    @property
    def stopping(self) -> bool: ...


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
    path = src.services.store.path
    free = _free_bytes(path.parent) if path is not None else None
    if free is not None and free < MIN_FREE_BYTES:
        return AdapterReadiness("failed", f"the disk holding state.db has {free / 2**20:.1f} MiB free "
                                          f"(less than {MIN_FREE_BYTES // 2**20} MiB): free space")
    fault = src.services.store.writer.stats.last_disk_fault
    if fault is not None and (ago := time.time() - fault[0]) < DISK_FAULT_HOLD:
        return AdapterReadiness("failed", f"a write failed {ago:.0f} s ago: {fault[1]}")
    return AdapterReadiness("live")


def _free_bytes(directory: Path) -> int | None:
    try:
        st = os.statvfs(directory)
    except (OSError, AttributeError):  # statvfs is POSIX only
        return None
    return st.f_bavail * st.f_frsize


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


def _fds_readiness() -> dict[str, object]:
    usage = fd_usage()
    if usage is None:  # no /proc: nothing to judge by
        return {"state": "live", "reason": None}
    body: dict[str, object] = {"state": "live", "reason": None, "open": usage.open, "limit": usage.limit}
    if usage.low:
        body.update(state="degraded", reason=f"{usage.describe()}, under {LOW_HEADROOM:.0%}: raise the "
                                             "open-file limit (LimitNOFILE) or find what holds them")
    return body


def _http_body(src: HealthSource) -> dict[str, object] | None:
    server = src.http_server
    if server is None:
        return None
    return {"connections": server.connections, "max_connections": server.max_connections,
            "refused": server.refused}


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
        adapters = adapters_readiness(src)
        storage, checked_at = await probe.result()
        fds = _fds_readiness()
        ready = (not src.stopping and storage.state == "live" and fds["state"] == "live"
                 and all(a.state == "live" for a in adapters.values()))
        body = {
            "status": "stopping" if src.stopping else ("ready" if ready else "not_ready"),
            "storage": {**storage.as_dict(), "checked_at": checked_at},
            "fds": fds,
            "http": _http_body(src),
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




