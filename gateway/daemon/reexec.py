"""How a daemon stopped for /restart comes back: through systemd when it runs under it, else by
replacing its own process image (``os.execv``: same pid, same arguments, same environment).

Under systemd the process exits with ``EX_RESTART`` and the unit's ``Restart=on-failure`` (every
code but 0 and the ``RestartPreventExitStatus=78`` of a bad config) starts it again after
``RestartSec``; exec-ing inside the unit would work too, but systemd would then see a process that
never said it stopped. Our descriptors (state.db, sockets, the single-writer lock) are
non-inheritable (PEP 446), so the new image starts with none of them open.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import NoReturn

import structlog

from gateway.routing.restart import EX_RESTART

__all__ = ["come_back", "under_systemd"]

log = structlog.get_logger("hermes.restart")


def under_systemd(env: Mapping[str, str] | None = None) -> bool:
    """Whether systemd started this process as a service (it sets ``INVOCATION_ID`` for each run)."""
    env = os.environ if env is None else env
    return bool(env.get("INVOCATION_ID")) or bool(env.get("NOTIFY_SOCKET"))


def come_back() -> NoReturn:
    """Restart this process: exit ``EX_RESTART`` for systemd, or exec the same command again."""
    if under_systemd():
        log.info("restart.exiting_for_systemd", exit_code=EX_RESTART)
        raise SystemExit(EX_RESTART)
    argv = [sys.executable, *sys.orig_argv[1:]]
    log.info("restart.reexec", argv=argv)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, argv)
    except OSError as exc:  # the interpreter went away (an upgrade): exit for a supervisor to start it
        log.error("restart.reexec_failed", error=f"{type(exc).__name__}: {exc}")
        raise SystemExit(EX_RESTART) from None
