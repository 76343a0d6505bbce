"""The gateway's side of the agent's ``cronjob`` tool: one ``CronPort`` per turn.

Routing builds the turn but sits below the scheduler, so it asks ``Services.cron_ports`` (the
``TurnCronPorts`` here, given by the daemon) for the port of the turn's chat. The port binds
the owner (the turn's chat and user) once, so the model can neither make a job for another chat
nor see one it may not, whatever it sends; a ``JobError`` becomes the ``ToolError`` the model
reads, and the job was not made or changed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import structlog

from adapters.base import InboundMessage
from core.tools import CronPort, ToolError
from gateway.errors import JobError
from gateway.routing.services import Services
from gateway.scheduler import JobOwner, Jobs, JobSpec, JobView, jobs_of

from .cron import chat_owner, job_json, local_time

__all__ = ["TurnCronPorts", "TurnJobs"]

log = structlog.get_logger("hermes.cron")

_NAME_WORDS = re.compile(r"[\w'-]+")
#: a list shows each prompt's head: 50 whole prompts would overflow the tool's result and cut its JSON
_LISTED_PROMPT_CHARS = 300


def _name_from(prompt: str) -> str:
    """A name for a job the model did not name: the prompt's first words."""
    words = _NAME_WORDS.findall(prompt)[:5]
    return " ".join(words)[:64] or "job"


class TurnJobs:
    """The scheduled jobs of one turn's chat, for the ``cronjob`` tool."""

    def __init__(self, jobs: Jobs, owner: JobOwner, tz: str) -> None:
        self._jobs = jobs
        self._owner = owner
        self._tz = tz

    def _result(self, action: str, view: JobView, **extra: Any) -> str:
        body: dict[str, Any] = {"success": True, "action": action, "job": job_json(view, self._tz),
                                "timezone": self._tz, **extra}
        return json.dumps(body, ensure_ascii=False)

    async def call(self, action: str, args: Mapping[str, Any]) -> str:
        try:
            return await self._call(action, args)
        except JobError as exc:
            log.info("cron.tool_refused", action=action, reason=str(exc))
            raise ToolError(f"{exc} Nothing was changed.") from None

    async def _call(self, action: str, args: Mapping[str, Any]) -> str:
        jobs, owner = self._jobs, self._owner
        toolsets = tuple(args["toolsets"]) if args.get("toolsets") is not None else None
        if action == "list":
            views = await jobs.list(owner)
            listed = [job_json(v, self._tz) for v in views]
            for job in listed:
                if len(job["prompt"]) > _LISTED_PROMPT_CHARS:
                    job["prompt"] = job["prompt"][:_LISTED_PROMPT_CHARS - 1] + "…"
            return json.dumps({"success": True, "timezone": self._tz, "count": len(views), "jobs": listed},
                              ensure_ascii=False)
        if action == "create":
            prompt = str(args["prompt"])
            spec = JobSpec(name=str(args.get("name") or _name_from(prompt)), prompt=prompt,
                           schedule=str(args["schedule"]), deliver=str(args.get("deliver") or "origin"),
                           toolsets=toolsets, catch_up="skip" if args.get("catch_up") == "skip" else "once")
            view = await jobs.create(owner, spec)
            log.info("cron.tool_created", job=view.id, platform=owner.platform)
            return self._result("create", view, next_run=local_time(view.next_due, self._tz))
        ref = str(args["name"])
        if action == "update":
            view = await jobs.update(owner, ref, prompt=args.get("prompt"), schedule=args.get("schedule"),
                                     deliver=args.get("deliver"), toolsets=toolsets)
        elif action == "pause":
            view = await jobs.pause(owner, ref)
        elif action == "resume":
            view = await jobs.resume(owner, ref)
        elif action == "remove":
            view = await jobs.remove(owner, ref)
        elif action == "run":
            view = await jobs.run_now(owner, ref)
            return self._result("run", view, note="The run starts now; its answer is delivered on its own.")
        else:
            raise ToolError(f"Unknown action {action!r}.")
        return self._result(action, view, next_run=local_time(view.next_due, self._tz))


class TurnCronPorts:
    """``Services.cron_ports``: the port of a turn's chat, or None when jobs are off."""

    def port(self, services: Services, msg: InboundMessage, session_key: str) -> CronPort | None:
        jobs = jobs_of(services)
        if jobs is None or not services.config.settings.cron.enabled:
            return None
        # The zone the scheduler read once at start: no file is read per turn.
        return TurnJobs(jobs, chat_owner(msg, session_key), jobs.tz)
