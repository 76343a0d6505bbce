"""``hermes-gateway status`` (``doctor`` is in ``gateway.cli.doctor``).

``status`` asks the running daemon over its control socket and falls back to
``gateway.state.json``, which the daemon rewrites every few seconds (so it
also answers for a daemon whose socket is unreachable); it needs nothing from
config.yaml, so a broken one is a warning on stderr, not a refusal. ``doctor``
checks what breaks a gateway in practice and prints a fix for each problem; it
never prints a secret and exits non-zero when a check failed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from gateway.config import default_home, load_config
from gateway.errors import ConfigError
from gateway.status import STATE_FILE, read_state_file
from storage.errors import GatewayError

__all__ = ["register", "status"]

HomeOption = Annotated[Path | None, typer.Option(
    "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME or ~/.hermes)")]
#: a state file older than this while its pid lives means the daemon is stuck (it refreshes every 2 s)
STALE_AFTER = 30.0
WAL_WARN_BYTES = 256 * 1024 * 1024
#: an open-file limit below this is used up by a few thousand connections
FD_LIMIT_WARN = 4096
EX_NOT_RUNNING = 3


# --------------------------------------------------------------------- status


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ago(seconds: float) -> str:
    s = max(0, int(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    return f"{m}m {s}s" if m else f"{s}s"


def _from_socket(home: Path) -> dict[str, Any] | None:
    from gateway.control.client import SOCKET_NAME, call_sync

    if not (home / SOCKET_NAME).exists():
        return None
    try:
        result = call_sync(home, "status", {}, reply_within=10)
    except (GatewayError, OSError, TimeoutError):
        return None
    result["source"] = "control socket"
    return result


def _from_file(home: Path) -> dict[str, Any] | None:
    data = read_state_file(home)
    if data is None:
        return None
    data["source"] = str(home / STATE_FILE)
    return data


def _print_status(data: dict[str, Any]) -> None:
    now = time.time()
    started = data.get("started_at")
    uptime = f", up {_ago(now - started)}" if isinstance(started, (int, float)) else ""
    typer.echo(f"hermes-gateway is running (pid {data.get('pid')}{uptime}) — from {data['source']}")
    adapters = data.get("adapters") or {}
    if adapters:
        typer.echo("Adapters:")
        for name, a in sorted(adapters.items()):
            state = a.get("state", "?")
            extra = [f"restarts {a['restarts']}"] if a.get("restarts") else []
            if a.get("reason"):
                extra.append(str(a["reason"]))
            elif a.get("last_error"):
                extra.append(f"last error: {a['last_error']}")
            typer.echo(f"  {name:<12} {state}" + (f"  ({'; '.join(extra)})" if extra else ""))
    turns = data.get("turns")
    if isinstance(turns, dict):
        typer.echo(f"Turns: {turns.get('running', 0)} running, {turns.get('waiting', 0)} waiting")
    storage = data.get("storage")
    conversion = storage.get("fts_conversion") if isinstance(storage, dict) else None
    if isinstance(conversion, dict):
        done, total = int(conversion.get("done", 0)), int(conversion.get("total", 0))
        typer.echo(f"Search index: moving to the compact layout, {done}/{total} messages "
                   f"({100 * done / max(1, total):.0f}%)")
    approvals = data.get("approvals_waiting")
    if isinstance(approvals, int) and approvals:
        typer.echo(f"Approvals: {approvals} waiting for an answer")
    owners = data.get("owners")
    if isinstance(owners, dict) and owners:
        typer.echo("Owners: " + "; ".join(f"{p} {', '.join(ids) or 'none yet'}" for p, ids in sorted(owners.items())))
    cron = data.get("cron")
    if isinstance(cron, dict) and cron.get("jobs"):
        nxt = cron.get("next")
        when = f"next: {nxt.get('name')} [{nxt.get('id')}] at {nxt.get('due_local')}" if isinstance(nxt, dict) \
            else "none due"
        typer.echo(f"Jobs: {cron['jobs']} scheduled ({cron.get('paused', 0)} paused), {when}")
    cluster = data.get("cluster")
    if isinstance(cluster, dict):
        _print_cluster(cluster)
    errors = [f"{n}: {a['last_error']}" for n, a in sorted(adapters.items()) if a.get("last_error")]
    last = data.get("last_error") or (errors[-1] if errors else None)
    typer.echo(f"Last error: {last or 'none'}")


def _print_cluster(cluster: dict[str, Any]) -> None:
    """Several nodes (PostgreSQL): each node, what it holds, and the database."""
    typer.echo(f"Cluster: this node {cluster.get('node_id')}; database {cluster.get('database', '?')}")
    for node in cluster.get("nodes") or []:
        if not isinstance(node, dict):
            continue
        alive = "alive" if node.get("alive") else "silent"
        roles = ", ".join(node.get("roles") or []) or "no roles"
        typer.echo(f"  {node.get('node_id')}  {alive} (heartbeat {node.get('heartbeat_age_s')}s ago, "
                   f"{node.get('host')} pid {node.get('pid')}): {roles}; {node.get('lanes', 0)} chats")


def _warn_about_config(home: Path) -> None:
    try:
        load_config(home)
    except ConfigError as exc:
        typer.echo(f"hermes-gateway status: warning: configuration error (the daemon would not start again "
                   f"with it): {' '.join(str(exc).split())}", err=True)


def _not_running(home: Path, last: dict[str, Any] | None, as_json: bool) -> NoReturn:
    when = last.get("updated_at") if last else None
    last_error = last.get("last_error") if last else None
    if as_json:
        typer.echo(json.dumps({"running": False, "home": str(home),
                               "last_seen": when if isinstance(when, (int, float)) else None,
                               "last_error": last_error or None}, indent=2, sort_keys=True))
    elif last is None:
        typer.echo(f"hermes-gateway is not running for {home} (no control socket, no {STATE_FILE}).")
    else:
        seen = f" (last seen {_ago(time.time() - when)} ago)" if isinstance(when, (int, float)) else ""
        typer.echo(f"hermes-gateway is not running for {home}{seen}.")
        if last_error:
            typer.echo(f"Last error: {last_error}")
    raise typer.Exit(EX_NOT_RUNNING)


def status(
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON, and nothing else.")] = False,
) -> None:
    """Show whether the daemon runs: pid, uptime, adapters, last error (exit 3 when it does not run)."""
    home = (home or default_home()).expanduser()
    _warn_about_config(home)
    data = _from_socket(home)
    if data is None:
        data = _from_file(home)
        if data is not None:
            if not (_pid_alive(data.get("pid")) and data.get("running", False)):
                _not_running(home, data, as_json)
            updated = data.get("updated_at")
            if isinstance(updated, (int, float)) and time.time() - updated > STALE_AFTER:
                data["stale_seconds"] = round(time.time() - updated)
    if data is None:
        _not_running(home, None, as_json)
    if as_json:
        typer.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    _print_status(data)
    if "stale_seconds" in data:
        typer.echo(f"Warning: the daemon has not refreshed its state for {data['stale_seconds']}s; "
                   "it may be stuck (systemd's watchdog restarts it when run as a service).")


# --------------------------------------------------------------------- doctor



def register(app: typer.Typer) -> None:
    from gateway.cli.doctor import doctor  # doctor builds on this module's status helpers

    app.command("status")(status)
    app.command("doctor")(doctor)
