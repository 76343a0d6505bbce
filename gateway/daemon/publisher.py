"""``gateway.state.json`` (for ``hermes-gateway status`` when the control socket is not
there) and systemd's READY=1 / STATUS=, kept current while the daemon runs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any, Protocol

import structlog

from gateway.daemon.sdnotify import SdNotifier
from gateway.status import STATE_FILE, SnapshotSource, adapters_readiness, status_snapshot

log = structlog.get_logger("hermes.health")

PUBLISH_INTERVAL = 2.0
#: the longest the daemon waits for its adapters before telling systemd it is ready anyway
READY_WAIT = 30.0
READY_POLL = 0.05
CHANGE_POLL = 0.5


class PublisherSource(SnapshotSource, Protocol):
    @property
    def stopping(self) -> bool: ...


class StatePublisher:
    """Writes ``gateway.state.json`` (mode 0600, atomically) while the daemon runs."""

    def __init__(self, home: Path, src: PublisherSource, started_at: float | None = None) -> None:
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
        adapters = ", ".join(f"{n} {a.state}" for n, a in adapters_readiness(self._src).items()) or "none"
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
