"""``Jobs``: make, find, change and remove scheduled jobs (the one instance is ``Services.jobs``)."""

from __future__ import annotations

from typing import Any

from gateway.errors import JobError
from gateway.scheduler.model import JobOwner, JobSpec, JobView

__all__ = ["Jobs", "jobs_of"]


class Jobs:
    """The daemon's scheduled jobs; every method refuses with a JobError a person can read."""

    async def create(self, owner: JobOwner, spec: JobSpec) -> JobView:
        raise JobError("Scheduled jobs are not available yet.")

    async def list(self, viewer: JobOwner | None) -> list[JobView]:
        raise JobError("Scheduled jobs are not available yet.")

    async def get(self, viewer: JobOwner | None, ref: str) -> JobView:
        raise JobError("Scheduled jobs are not available yet.")

    async def update(self, viewer: JobOwner | None, ref: str, *, name: str | None = None,
                     prompt: str | None = None, schedule: str | None = None, deliver: str | None = None,
                     toolsets: tuple[str, ...] | None = None) -> JobView:
        raise JobError("Scheduled jobs are not available yet.")

    async def pause(self, viewer: JobOwner | None, ref: str) -> JobView:
        raise JobError("Scheduled jobs are not available yet.")

    async def resume(self, viewer: JobOwner | None, ref: str) -> JobView:
        raise JobError("Scheduled jobs are not available yet.")

    async def remove(self, viewer: JobOwner | None, ref: str) -> JobView:
        raise JobError("Scheduled jobs are not available yet.")

    async def run_now(self, viewer: JobOwner | None, ref: str) -> JobView:
        raise JobError("Scheduled jobs are not available yet.")

    def next_due(self) -> JobView | None:
        return None


def jobs_of(services: Any) -> Jobs | None:
    """``services.jobs`` typed (routing sits below the scheduler, so ``Services`` cannot name it)."""
    jobs = getattr(services, "jobs", None)
    return jobs if isinstance(jobs, Jobs) else None
