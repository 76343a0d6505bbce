"""``cron`` in config.yaml: scheduled jobs (README, "Scheduled jobs").

Jobs run inside the daemon (``gateway.scheduler``); these keys bound how often, how many and
how many together, so a chat cannot turn the daemon into a busy loop.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["CronConfig"]


class CronConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: off: no scheduler runs and no job can be made (stored jobs stay and run again when on)
    enabled: bool = True
    #: the IANA zone schedules are read in ("Europe/Berlin"); unset: the system's
    timezone: str | None = None
    #: this many runs at most at once (a job never runs twice at once either way)
    max_concurrent: int = Field(default=2, ge=1, le=1000)
    #: after this many failed runs in a row a job is paused (and says so)
    max_failures: int = Field(default=3, ge=1, le=100)
    #: the shortest gap between two runs of one job (seconds)
    min_interval: float = Field(default=60.0, gt=0)
    #: the most jobs one owner (chat or user) may have
    max_jobs_per_owner: int = Field(default=50, ge=1, le=10_000)
    #: the longest prompt a job may have (characters)
    max_prompt_chars: int = Field(default=8000, ge=1, le=1_000_000)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as 'Europe/Berlin')") from exc
        return value
