"""/cron: the scheduled jobs this chat may see, and pause, resume, remove or run one now.

Jobs are made by asking the agent (its ``cronjob`` tool) or with ``hermes-gateway cron add``;
the chat command manages what exists. The helpers here (who owns a job made in a chat, the
time zone, a job as JSON) are shared with the tool's port and the control socket, so the three
front-ends describe jobs alike.
"""

from __future__ import annotations

import datetime as dt
from typing import Any
from zoneinfo import ZoneInfo

from adapters.base import InboundMessage
from gateway.config import LoadedConfig
from gateway.errors import JobError
from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.scheduler import JobOwner, Jobs, JobView, describe_job, jobs_of
from gateway.scheduler.schedules import local_zone

__all__ = ["JOBS_OFF", "chat_owner", "job_json", "job_zone", "local_time", "register_cron_commands"]

JOBS_OFF = "Scheduled jobs are off in this gateway (cron.enabled)."
_USAGE = "Usage: /cron [list] | /cron pause|resume|remove|run <name or id>"
#: a list in a chat stays readable; the CLI shows them all
_SHOWN = 20


def chat_owner(msg: InboundMessage, session_key: str) -> JobOwner:
    """The owner of a job made in this chat: where ``origin`` delivers, and who may see it."""
    return JobOwner(platform=msg.platform, chat_id=msg.chat_id, thread_id=msg.thread_id, user_id=msg.user_id,
                    session_key=session_key, chat_type=str(msg.chat_type))


def job_zone(config: LoadedConfig) -> str:
    """The zone schedules are read in and times are shown in (``cron.timezone``, else the system's),
    as the scheduler finds it."""
    return str(local_zone(config.settings.cron.timezone))


def local_time(ts: float | None, tz: str) -> str | None:
    if ts is None:
        return None
    return dt.datetime.fromtimestamp(ts, ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")


def job_json(view: JobView, tz: str) -> dict[str, Any]:
    """A job as the tool's result and ``cron list --json`` give it (times as unix and local text)."""
    owner = view.owner
    return {
        "id": view.id, "name": view.name, "schedule": view.schedule, "kind": view.kind,
        "prompt": view.prompt, "deliver": view.deliver, "paused": view.paused,
        "next_due": view.next_due, "next_run": local_time(view.next_due, tz),
        "last_run_at": view.last_run_at, "last_status": view.last_status, "failures": view.failures,
        "created_at": view.created_at,
        "toolsets": list(view.toolsets) if view.toolsets is not None else None, "catch_up": view.catch_up,
        "owner": {"platform": owner.platform, "chat_id": owner.chat_id, "thread_id": owner.thread_id,
                  "user_id": owner.user_id, "chat_type": owner.chat_type},
    }


def _jobs(ctx: CommandContext) -> Jobs | None:
    return jobs_of(ctx.services) if ctx.services.config.settings.cron.enabled else None


async def _list(jobs: Jobs, viewer: JobOwner, tz: str) -> str:
    views = await jobs.list(viewer)
    if not views:
        return ("No scheduled jobs here. Ask the agent, e.g. \"remind me every weekday at 9 to stand up\", "
                "to make one.")
    lines = [f"⏰ Scheduled jobs ({len(views)}), times in {tz}:"]
    lines.extend(f"• {describe_job(v, tz=tz)}" for v in views[:_SHOWN])
    if len(views) > _SHOWN:
        lines.append(f"… and {len(views) - _SHOWN} more (hermes-gateway cron list shows all)")
    return "\n".join(lines)


async def _cron(ctx: CommandContext) -> str:
    jobs = _jobs(ctx)
    if jobs is None:
        return JOBS_OFF
    viewer = chat_owner(ctx.message, ctx.session_key)
    tz = jobs.tz
    verb, _, ref = ctx.args.partition(" ")
    verb, ref = verb.lower(), ref.strip()
    try:
        if verb in ("", "list", "ls"):
            return await _list(jobs, viewer, tz)
        if verb not in ("pause", "resume", "remove", "rm", "delete", "run"):
            return _USAGE
        if not ref:
            return f"Usage: /cron {verb} <name or id> (/cron lists them)"
        if verb == "pause":
            view = await jobs.pause(viewer, ref)
            return f"⏸ Paused {view.name} [{view.id}]. /cron resume {view.name} starts it again."
        if verb == "resume":
            view = await jobs.resume(viewer, ref)
            when = local_time(view.next_due, tz)
            return f"▶️ Resumed {view.name} [{view.id}]" + (f": next run {when}." if when else ".")
        if verb == "run":
            view = await jobs.run_now(viewer, ref)
            return f"🏃 Running {view.name} [{view.id}] now; its answer is delivered to {view.deliver}."
        view = await jobs.remove(viewer, ref)
        return f"🗑 Removed {view.name} [{view.id}]."
    except JobError as exc:
        return f"⚠️ {exc}"


def register_cron_commands(registry: CommandRegistry) -> None:
    registry.register(Command("cron", "list this chat's scheduled jobs; pause, resume, remove or run one", _cron,
                              immediate=True, usage="[list|pause|resume|remove|run <name or id>]"))
