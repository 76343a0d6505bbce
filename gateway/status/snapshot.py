"""What the daemon says about itself, whoever asks: readiness of each adapter and the
status snapshot that the control socket's ``status`` answers with and
``gateway.state.json`` holds (written by ``gateway.daemon.publisher``)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from adapters.base import AdapterStateView
from gateway.config.models import PAIRING_PLATFORMS
from gateway.logs import redact

if TYPE_CHECKING:
    from gateway.routing.services import Services

STATE_FILE = "gateway.state.json"
READINESS_STATES = ("starting", "live", "degraded", "failed")


class SnapshotSource(Protocol):
    """What a status snapshot needs (the control socket's view of the ``Gateway`` is no more than this)."""

    adapter_states: dict[str, Any]
    @property
    def services(self) -> Services | None: ...


@dataclass(frozen=True)
class AdapterReadiness:
    state: str  # starting | live | degraded | failed
    reason: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {"state": self.state, "reason": redact(self.reason) if self.reason else None}


def adapter_readiness(supervised: AdapterStateView, adapter: object | None) -> AdapterReadiness:
    """One adapter's readiness from the runner's view and the adapter's own, if it has one."""
    if supervised.state == "failed":
        return AdapterReadiness("failed", supervised.last_error or "the adapter gave up")
    if supervised.state == "standby":
        # several nodes: another node holds this connection (a role); this node is ready all the same
        return AdapterReadiness("live", "held by another node")
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


def adapters_readiness(src: SnapshotSource) -> dict[str, AdapterReadiness]:
    adapters = src.services.adapters if src.services is not None else {}
    return {name: adapter_readiness(st, adapters.get(name)) for name, st in sorted(src.adapter_states.items())}


def last_error(states: Mapping[str, AdapterStateView]) -> str | None:
    errors = [f"{name}: {redact(st.last_error)}" for name, st in sorted(states.items()) if st.last_error]
    return errors[-1] if errors else None



def status_snapshot(src: SnapshotSource, *, running: bool = True, started_at: float | None = None
                    ) -> dict[str, Any]:
    """What ``hermes-gateway status`` shows, from either source: the control socket answers with this,
    and ``gateway.state.json`` holds it. Adapter ``state``/``reason`` are readiness (as /readyz);
    ``supervision`` is the runner's own state."""
    readiness = adapters_readiness(src)
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
        "last_error": last_error(src.adapter_states),
    }
    # several nodes (PostgreSQL): every node, what it holds, the database's health (the daemon's
    # cluster view, refreshed at each heartbeat); absent on SQLite
    cluster = getattr(src, "cluster_view", None)
    if cluster is not None:
        body["cluster"] = cluster
    if services is not None:
        w = services.store.writer.stats
        body["turns"] = {"running": services.lanes.running, "waiting": services.lanes.total_waiting}
        body["approvals_waiting"] = services.approvals.count
        body["storage"] = {"queue_depth": w.queue_depth, "commits": w.commits, "busy_retries": w.busy_retries,
                           "unindexed": w.index_pending,
                           "fts_conversion": None if w.fts_conversion is None
                           else {"done": w.fts_conversion[0], "total": w.fts_conversion[1]}}
        body["model"] = services.model_name
        body["owners"] = {p: services.owners.of(p) for p in sorted(services.adapters) if p in PAIRING_PLATFORMS}
        from gateway.scheduler import jobs_of  # here: the state file's readers need none of the scheduler

        jobs = jobs_of(services)
        if jobs is not None:
            body["cron"] = jobs.status()
    return body


def read_state_file(home: Path) -> dict[str, Any] | None:
    """The last published state, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads((home / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
