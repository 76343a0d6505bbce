"""What a scheduled job is, as the front-ends (the cronjob tool, /cron, the CLI) see it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Literal
from zoneinfo import ZoneInfo

__all__ = ["JobKind", "JobOwner", "JobSpec", "JobView", "describe_job"]

JobKind = Literal["cron", "every", "once"]


@dataclass(frozen=True)
class JobOwner:
    """Who made a job and where (``deliver: origin`` delivers here)."""

    platform: str
    chat_id: str
    thread_id: str | None
    user_id: str | None
    #: the chat's session key: whoever chats under it sees the job
    session_key: str
    chat_type: str = "dm"


@dataclass(frozen=True)
class JobSpec:
    #: unique per owner, 1-64 printable characters
    name: str
    #: what the agent is asked at each run
    prompt: str
    #: "0 8 * * 1-5" (cron), "every 30m" / "every 2h" / "every 1d", "in 2h", "2026-12-01T08:00"
    #: (ISO, in cron.timezone unless it has an offset)
    schedule: str
    #: "origin" | "home:<platform>" | "<platform>:<chat_id>[:<thread_id>]" | "none"
    deliver: str = "origin"
    #: None: the toolsets of the owner's platform
    toolsets: tuple[str, ...] | None = None
    catch_up: Literal["once", "skip"] = "once"


@dataclass(frozen=True)
class JobView:
    id: str
    name: str
    prompt: str
    schedule: str
    kind: JobKind
    deliver: str
    owner: JobOwner
    paused: bool
    #: unix time; None: nothing due (paused, or a one-shot that ran)
    next_due: float | None
    last_run_at: float | None
    #: "ok" | "failed" | "interrupted" | None (never ran)
    last_status: str | None
    #: failed runs in a row
    failures: int
    created_at: float
    toolsets: tuple[str, ...] | None = None
    catch_up: Literal["once", "skip"] = "once"


def _local(ts: float, tz: str) -> str:
    return dt.datetime.fromtimestamp(ts, ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M %Z")


def describe_job(view: JobView, *, tz: str) -> str:
    """One line for lists: name, id, schedule, next due (local time), paused, last status."""
    if view.paused:
        when = "paused"
    elif view.next_due is None:
        when = "done"
    else:
        when = f"next {_local(view.next_due, tz)}"
    last = f", last {view.last_status}" if view.last_status else ""
    if view.failures and view.last_status == "failed":
        last += f" ({view.failures} in a row)"
    return f"{view.name} [{view.id}] · {view.schedule} · {when}{last} → {view.deliver}"
