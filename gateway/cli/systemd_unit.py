"""The text of the systemd unit: rendering, systemd's quoting rules, and reading one back.

Every path that goes into the unit is the user's (a home may hold spaces, ``%``,
quotes), so each setting is written by the rules of the parser systemd uses for
it (systemd.unit(5), systemd.exec(5), systemd.service(5)):

- ``%`` starts a specifier in every setting used here: written ``%%``.
- ``WorkingDirectory=`` takes the rest of the line as one path: no quoting
  (quotes would become part of the path).
- ``ReadWritePaths=`` is a space-separated list and ``Environment=`` a list of
  assignments: each entry goes in double quotes, with ``\\`` and ``"`` escaped.
- ``ExecStart=`` splits like a shell and also expands ``$VAR``: words are quoted
  when needed and ``$`` is written ``$$``.

Control characters (a newline above all) cannot be written safely in any of
them; such a path is refused.

There is no ``EnvironmentFile=``: the daemon reads ``<home>/.env`` itself, and
systemd would read the same file by other rules (its quotes, escapes and
comments), so a value could differ between a service and ``hermes-gateway run``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from gateway.errors import UnitPathError

__all__ = [
    "LIMIT_NOFILE",
    "STOP_MARGIN",
    "UnitOptions",
    "UnitPathError",
    "exec_start_line",
    "installed_limit_nofile",
    "installed_stop_timeout",
    "render_unit",
    "stop_timeout",
]

#: beyond drain_timeout + disconnect_timeout: closing the HTTP server and control socket, background
#: work giving up, then the writer draining its queue and the TRUNCATE checkpoint
STOP_MARGIN = 15.0
WATCHDOG_SEC = 30
#: open files the service may hold: every connection, state.db file and platform socket is one, and
#: systemd's default soft limit (1024) is used up by a thousand idle connections
LIMIT_NOFILE = 65536
#: DefaultTimeoutStopSec of systemd-system.conf(5), for a unit that sets none
SYSTEMD_DEFAULT_STOP = 90.0
_UNSAFE = re.compile(r"[\x00-\x1f\x7f]")
_NEEDS_QUOTES = re.compile(r"[\s\"'\\;]")


@dataclass(frozen=True)
class UnitOptions:
    home: Path
    exec_start: str  # already a rendered ExecStart= value (see exec_start_line)
    system: bool = False
    user: str | None = None  # a system unit's account; required for one
    drain_timeout: float = 20.0
    disconnect_timeout: float = 10.0


def stop_timeout(drain_timeout: float, disconnect_timeout: float) -> int:
    """TimeoutStopSec for these bounds: the shutdown's steps one after another, plus the margin."""
    return math.ceil(drain_timeout + disconnect_timeout + STOP_MARGIN)


def _checked(value: str) -> str:
    if _UNSAFE.search(value):
        raise UnitPathError(f"{value!r} holds a control character, which a systemd unit cannot carry")
    return value


def _specifiers(value: str) -> str:
    return _checked(value).replace("%", "%%")


def _quoted(value: str) -> str:
    escaped = _specifiers(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _exec_word(word: str) -> str:
    word = word.replace("$", "$$")
    return _quoted(word) if not word or _NEEDS_QUOTES.search(word) else _specifiers(word)


def exec_start_line(argv: list[str]) -> str:
    return " ".join(_exec_word(a) for a in argv)


def _under_tmp(path: Path) -> bool:
    return any(path == Path(t) or Path(t) in path.parents for t in ("/tmp", "/var/tmp"))


def render_unit(opts: UnitOptions) -> str:
    if opts.system and not opts.user:
        raise ValueError("a system unit needs the account it runs as")
    home = str(opts.home)
    lines = [
        "# Written by `hermes-gateway service install`. Secrets stay in .env (the daemon reads it), never here.",
        "[Unit]",
        "Description=hermes-gateway: chat with your AI agent over Telegram, Discord, Slack and HTTP",
        "After=network-online.target",
        "Wants=network-online.target",
        "StartLimitIntervalSec=300",
        "StartLimitBurst=10",
        "",
        "[Service]",
        "Type=notify",
        "NotifyAccess=main",
        f"Environment={_quoted(f'HERMES_HOME={home}')}",
        f"WorkingDirectory={_specifiers(home)}",
        f"ExecStart={opts.exec_start}",
        # READY=1 comes once adapters are up, after 30 s at the latest (then /readyz tells the rest).
        "TimeoutStartSec=90",
        f"WatchdogSec={WATCHDOG_SEC}",
        "Restart=on-failure",
        "RestartSec=5",
        "# Configuration errors and a second daemon on the same home exit 78: restarting cannot help.",
        "RestartPreventExitStatus=78",
        f"# gateway.drain_timeout ({opts.drain_timeout:g} s) + gateway.disconnect_timeout "
        f"({opts.disconnect_timeout:g} s) + {STOP_MARGIN:g} s for the writer to drain and checkpoint.",
        f"TimeoutStopSec={stop_timeout(opts.drain_timeout, opts.disconnect_timeout)}",
        "KillMode=mixed",
        "# Each connection, state.db file and platform socket holds a descriptor (systemd's default: 1024).",
        f"LimitNOFILE={LIMIT_NOFILE}",
        "NoNewPrivileges=true",
        "ProtectSystem=strict",
        "# The home is re-opened for writing; the rest of /home (and /root) stays read-only.",
        "ProtectHome=read-only",
        f"ReadWritePaths={_quoted(home)}",
        # A private /tmp would hide a home that lives in /tmp (as in tests and throwaway set-ups).
        "PrivateTmp=false" if _under_tmp(opts.home) else "PrivateTmp=true",
        "UMask=0077",
    ]
    if opts.system:
        lines.append(f"User={opts.user}")
    lines += ["", "[Install]", f"WantedBy={'multi-user.target' if opts.system else 'default.target'}", ""]
    return "\n".join(lines)


# ------------------------------------------------------------ reading a unit back

_UNITS = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0,
          "seconds": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0, "h": 3600.0, "hr": 3600.0,
          "hour": 3600.0, "hours": 3600.0}
_SPAN_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def _timespan(value: str) -> float | None:
    """systemd.time(7) spans as units use them ("45", "45s", "1min 30s", "infinity"); None if unreadable."""
    value = value.strip().lower()
    if value == "infinity":
        return math.inf
    total, pos = 0.0, 0
    for m in _SPAN_PART.finditer(value):
        if value[pos:m.start()].strip() or m.group(2) not in _UNITS:
            return None
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total if pos and not value[pos:].strip() else None


def installed_stop_timeout(unit_text: str) -> float | None:
    """The unit's TimeoutStopSec (the last assignment wins, as in systemd; absent means systemd's
    default); None when it cannot be read."""
    found: float | None = SYSTEMD_DEFAULT_STOP
    section = ""
    for raw in unit_text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line.startswith(("TimeoutStopSec=", "TimeoutSec=")):
            found = _timespan(line.partition("=")[2])
    return found


def installed_limit_nofile(unit_text: str) -> float | None:
    """The unit's soft LimitNOFILE (``soft:hard`` or one value; ``infinity`` is math.inf); None when
    the unit sets none (systemd's default applies) or it cannot be read."""
    found: float | None = None
    section = ""
    for raw in unit_text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line
        elif section == "[Service]" and line.startswith("LimitNOFILE="):
            soft = line.partition("=")[2].split(":")[0].strip().lower()
            found = math.inf if soft == "infinity" else (int(soft) if soft.isdigit() else None)
    return found
