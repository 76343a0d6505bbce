"""The control socket's ``cron.*`` requests (``hermes-gateway cron …``): jobs through the daemon.

- ``cron.list`` -> ``{"timezone", "jobs": [job, …]}`` (every job: the CLI is the owner's)
- ``cron.add`` ``{"name", "schedule", "prompt", "deliver"?, "toolsets"?, "catch_up"?}`` -> ``{"job"}``
- ``cron.pause`` / ``cron.resume`` / ``cron.remove`` / ``cron.run`` ``{"ref"}`` -> ``{"job"}``

A job made here is owned by the terminal user who asked (platform ``cli``), so a terminal chat
of that user sees it too. ``cli`` cannot be posted to unasked, so without ``deliver`` a job goes
to the first home channel set (config order of the platforms), and is refused when none is.
A refusal is the ``JobError`` itself: the CLI prints its message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.commands import JOBS_OFF, job_json
from gateway.control.wire import Connection, Op, param
from gateway.errors import JobError, RequestError
from gateway.routing.services import Services
from gateway.scheduler import JobOwner, Jobs, JobSpec, jobs_of
from gateway.scheduler.jobs import REQUEST_ONLY

__all__ = ["CLI_PLATFORM", "cli_owner", "cron_ops"]

CLI_PLATFORM = "cli"


def cli_owner(user: str) -> JobOwner:
    """The owner of a job made on the command line by the login ``user``."""
    return JobOwner(platform=CLI_PLATFORM, chat_id=CLI_PLATFORM, thread_id=None, user_id=user,
                    session_key=f"{CLI_PLATFORM}:{user}", chat_type="dm")


def _jobs(services: Services) -> Jobs:
    jobs = jobs_of(services)
    if jobs is None or not services.config.settings.cron.enabled:
        raise JobError(JOBS_OFF)
    return jobs


def _only(params: dict[str, Any], op: str, allowed: set[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise RequestError(f"unknown parameter(s) for {op}: {', '.join(unknown)}")


async def _default_deliver(services: Services) -> str:
    for platform in services.adapters:
        if platform in REQUEST_ONLY:
            continue
        if await services.home_channels.get(platform) is not None:
            return f"home:{platform}"
    raise JobError("Say where the answers go with --deliver (home:<platform>, <platform>:<chat_id> or none): "
                   "no platform has a home channel yet (/sethome in a chat sets one).")


def cron_ops(services: Callable[[], Services]) -> dict[str, Op]:
    """The ``cron.*`` ops; ``services`` gives the daemon's (it refuses while the daemon starts)."""

    async def list_jobs(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        _only(params, "cron.list", set())
        s = services()
        jobs = _jobs(s)
        tz = jobs.tz
        return {"timezone": tz, "jobs": [job_json(v, tz) for v in await jobs.list(None)]}

    async def add(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        _only(params, "cron.add", {"name", "schedule", "prompt", "deliver", "toolsets", "catch_up"})
        s = services()
        jobs = _jobs(s)
        toolsets = param(params, "toolsets", list, required=False)
        if toolsets is not None and not all(isinstance(t, str) for t in toolsets):
            raise RequestError("parameter 'toolsets' must be a list of names")
        catch_up = param(params, "catch_up", str, required=False) or "once"
        if catch_up not in ("once", "skip"):
            raise RequestError("parameter 'catch_up' must be 'once' or 'skip'")
        deliver = param(params, "deliver", str, required=False) or await _default_deliver(s)
        spec = JobSpec(name=param(params, "name", str), prompt=param(params, "prompt", str),
                       schedule=param(params, "schedule", str), deliver=deliver,
                       toolsets=tuple(toolsets) if toolsets is not None else None,
                       catch_up="skip" if catch_up == "skip" else "once")
        view = await jobs.create(cli_owner(conn.user), spec)
        return {"job": job_json(view, jobs.tz)}

    def by_ref(name: str) -> Op:
        async def op(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
            _only(params, f"cron.{name}", {"ref"})
            s = services()
            jobs = _jobs(s)
            ref = param(params, "ref", str)
            action = {"pause": jobs.pause, "resume": jobs.resume, "remove": jobs.remove, "run": jobs.run_now}[name]
            return {"job": job_json(await action(None, ref), jobs.tz)}

        return op

    return {"cron.list": list_jobs, "cron.add": add, **{f"cron.{n}": by_ref(n)
                                                         for n in ("pause", "resume", "remove", "run")}}
