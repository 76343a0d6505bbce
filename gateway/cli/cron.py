"""``hermes-gateway cron list|add|remove|pause|resume|run``: scheduled jobs from the command line.

Every change asks the running daemon over its control socket (``cron.*`` requests), so the
daemon stays the only writer of state.db and its scheduler learns of it at once; without a
daemon a change is refused (nothing would run the job anyway). ``list`` without a daemon reads
state.db read-only, as ``sessions list`` does. Jobs made here are owned by the terminal user;
the command line sees and manages every job.

Exit codes: 0 done; 1 the daemon refused (the reason is printed: a bad schedule, an unknown
job, a limit); 3 no daemon runs for this home (as ``status``); 78 a configuration error.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from gateway.cli.common import EX_USER, HomeOption, fail, quiet_logs, read_state
from gateway.config import LoadedConfig, default_home, load_config
from gateway.control import client as control_client
from gateway.errors import EX_CONFIG, ConfigError, DaemonNotRunningError
from storage import cron
from storage.errors import GatewayError

__all__ = ["cron_app"]

#: as ``hermes-gateway status`` when no daemon runs
EX_NOT_RUNNING = 3

cron_app = typer.Typer(
    help="List, add, pause, resume, run and remove scheduled jobs (through the running daemon).",
    no_args_is_help=True,
    add_completion=False,
)

RefArgument = Annotated[str, typer.Argument(metavar="JOB", help="The job's name or id")]


def _fail(message: str, code: int = EX_USER) -> NoReturn:
    fail("cron", message, code)


def _call(home: Path | None, op: str, params: dict[str, Any],
          offline: Callable[[LoadedConfig], dict[str, Any]] | None = None) -> dict[str, Any]:
    quiet_logs()
    root = (home or default_home()).expanduser()
    try:
        config = load_config(root)  # a broken config exits 78 here, as the daemon would
        return control_client.call_sync(root, op, params, reply_within=30)
    except ConfigError as exc:
        _fail(f"configuration error: {exc}", EX_CONFIG)
    except DaemonNotRunningError:
        if offline is not None:
            return offline(config)
        _fail(f"the daemon is not running for {root}, so jobs cannot be read or changed. Start it with "
              f"`hermes-gateway run --home {root}`.", EX_NOT_RUNNING)
    except GatewayError as exc:
        _fail(str(exc))


def _line(job: dict[str, Any]) -> str:
    if job["paused"]:
        when = "paused"
    elif job.get("next_run"):
        when = f"next {job['next_run']}"
    else:
        when = "done"
    last = f", last {job['last_status']}" if job.get("last_status") else ""
    if job.get("failures") and job.get("last_status") == "failed":
        last += f" ({job['failures']} in a row)"
    owner = job["owner"]
    made = f"{owner['platform']}:{owner['chat_id']}"
    return f"{job['name']} [{job['id']}] · {job['schedule']} · {when}{last} → {job['deliver']} (made in {made})"


def _stored(config: LoadedConfig) -> dict[str, Any]:
    """The jobs in state.db, read-only (no daemon runs to ask); none when there is no state.db yet."""
    # Here, not at the top: they load the chat commands and the scheduler, which only this needs.
    from gateway.commands import job_json, job_zone
    from gateway.scheduler.jobs import view_of

    tz = job_zone(config)
    rows: list[Any] = []
    try:
        rows = read_state(config.home, cron.all_jobs) or []
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):  # a state.db no daemon of this version has opened yet
            raise
    typer.echo("hermes-gateway cron: the daemon is not running; read from state.db (no job runs until it "
               "starts).", err=True)
    return {"timezone": tz, "jobs": [job_json(view_of(r), tz) for r in rows]}


@cron_app.command("list")
def list_jobs(
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the jobs as JSON, and nothing else.")] = False,
) -> None:
    """List every scheduled job with its next run."""
    result = _call(home, "cron.list", {}, offline=_stored)
    jobs = list(result.get("jobs") or [])
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False, indent=2))
        return
    if not jobs:
        typer.echo("No scheduled jobs.")
        return
    typer.echo(f"{len(jobs)} scheduled job{'s' if len(jobs) != 1 else ''} (times in {result.get('timezone')}):")
    for job in jobs:
        typer.echo(f"  {_line(job)}")


@cron_app.command("add")
def add_job(
    name: Annotated[str, typer.Option("--name", help="A name for the job (unique per owner)")],
    schedule: Annotated[str, typer.Option(
        "--schedule", help="'0 8 * * 1-5' (cron), 'every 30m', 'in 2h' or an ISO time '2026-12-01T08:00'")],
    prompt: Annotated[str, typer.Option("--prompt", help="What the agent is asked at each run")],
    deliver: Annotated[str | None, typer.Option(
        "--deliver", help="home:<platform>, <platform>:<chat_id>[:<thread_id>] or none "
                          "(default: the first home channel set)")] = None,
    toolsets: Annotated[list[str] | None, typer.Option(
        "--toolset", help="A toolset the runs may use (repeat it; default: the platform's)")] = None,
    skip_missed: Annotated[bool, typer.Option(
        "--skip-missed", help="Due times missed while the daemon was down are skipped (default: one run "
                              "catches them up)")] = False,
    home: HomeOption = None,
) -> None:
    """Add a job."""
    params: dict[str, Any] = {"name": name, "schedule": schedule, "prompt": prompt}
    if deliver is not None:
        params["deliver"] = deliver
    if toolsets:
        params["toolsets"] = list(toolsets)
    if skip_missed:
        params["catch_up"] = "skip"
    job = _call(home, "cron.add", params)["job"]
    typer.echo(f"Added {_line(job)}")


def _by_ref(op: str, done: str) -> Any:
    def command(ref: RefArgument, home: HomeOption = None) -> None:
        job = _call(home, f"cron.{op}", {"ref": ref})["job"]
        typer.echo(f"{done} {_line(job)}")

    return command


cron_app.command("pause", help="Pause a job (it keeps its schedule; resume starts it again).")(
    _by_ref("pause", "Paused"))
cron_app.command("resume", help="Resume a paused job.")(_by_ref("resume", "Resumed"))
cron_app.command("run", help="Run a job now, once (its answer is delivered as usual).")(
    _by_ref("run", "Running now:"))
cron_app.command("remove", help="Remove a job.")(_by_ref("remove", "Removed"))
