"""Scheduled jobs: "every morning at 8, summarise my inbox and send it to Telegram".

``model`` is what a job is, ``jobs`` makes and changes them (``Services.jobs``), ``schedules``
reads the three schedule forms, ``scheduler`` is the one task that runs them when due and
``run`` is one run: a fresh agent turn whose answer goes out through the delivery ledger.
"""

from gateway.errors import JobError
from gateway.scheduler.jobs import Jobs, jobs_of
from gateway.scheduler.model import JobOwner, JobSpec, JobView, describe_job

__all__ = ["JobError", "JobOwner", "JobSpec", "JobView", "Jobs", "describe_job", "jobs_of"]
