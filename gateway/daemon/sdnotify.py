"""The systemd notify protocol (``sd_notify(3)``) without libsystemd.

systemd passes ``NOTIFY_SOCKET`` (a filesystem path, or ``@name`` for an
abstract socket) to a ``Type=notify`` service; each datagram sent there is a
newline-separated list of ``KEY=value`` assignments. ``WATCHDOG_USEC`` (with
``WATCHDOG_PID``) asks for ``WATCHDOG=1`` at least that often: the pings come
from a task on the event loop, so a stalled loop stops them and systemd
restarts the process. Outside systemd every call is a no-op.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping

import structlog

log = structlog.get_logger("hermes.sdnotify")


def _address(raw: str) -> str | bytes:
    # An abstract socket name starts with a NUL byte; systemd writes it as '@'.
    if raw.startswith("@"):
        return b"\0" + raw[1:].encode()
    return raw


class SdNotifier:
    """One process's link to systemd; inert when ``NOTIFY_SOCKET`` is not set."""

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        raw = env.get("NOTIFY_SOCKET", "")
        self._address: str | bytes | None = _address(raw) if raw and raw != "@" else None
        self._sock: socket.socket | None = None
        self.watchdog_interval = self._watchdog_seconds(env)

    @staticmethod
    def _watchdog_seconds(env: Mapping[str, str]) -> float | None:
        """Half of WATCHDOG_USEC, the interval sd_watchdog_enabled(3) recommends; None when off."""
        pid = env.get("WATCHDOG_PID")
        if pid and pid != str(os.getpid()):
            return None  # meant for another process (e.g. a wrapper that exec'd us is gone)
        try:
            usec = int(env.get("WATCHDOG_USEC", "0"))
        except ValueError:
            return None
        return usec / 2_000_000 if usec > 0 else None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def notify(self, **fields: str | int) -> bool:
        """Send ``KEY=value`` lines (``notify(READY=1, STATUS="...")``). True if a datagram went out."""
        if self._address is None:
            return False
        payload = "\n".join(f"{k}={str(v).replace(chr(10), ' ')}" for k, v in fields.items()).encode()
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
                self._sock.setblocking(False)
            self._sock.sendto(payload, self._address)
        except OSError as exc:
            # systemd may be restarting; the service must not fail because a status line did not arrive.
            log.warning("sdnotify.send_failed", error=str(exc), fields=sorted(fields))
            return False
        return True

    def ready(self, status: str) -> None:
        self.notify(READY=1, STATUS=status, MAINPID=os.getpid())

    def status(self, status: str) -> None:
        self.notify(STATUS=status)

    def stopping(self, status: str) -> None:
        self.notify(STOPPING=1, STATUS=status)

    async def watchdog(self) -> None:
        """Ping systemd's watchdog until cancelled (returns at once when it is off)."""
        interval = self.watchdog_interval
        if interval is None or not self.enabled:
            return
        log.info("sdnotify.watchdog", interval_seconds=interval)
        while True:
            self.notify(WATCHDOG=1)
            await asyncio.sleep(interval)

    def close(self) -> None:
        """Close the notify socket (the daemon's last step at stop; notify() opens it again if needed)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
