"""The three forms of a schedule, and when each is next due.

- a cron expression (five fields, or @hourly/@daily/@weekly/@monthly/@yearly), read in the
  job's time zone with croniter;
- ``every <n><s|m|h|d>``: a fixed interval of elapsed time from the job's creation (so
  ``every 1d`` is every 24 hours; a wall-clock time of day is a cron expression);
- a one-shot: ``in <n><unit>`` or an ISO timestamp (the zone's local time unless it has an offset).

Daylight saving time, for cron expressions (the only form that names wall-clock times):
a time the spring-forward gap skips (02:30 in Europe/Berlin on the last Sunday of March)
runs once, at the end of the gap (03:00): a daily job is never silently lost. Several such
times (*/15 in the gap) run once together. A time the fall-back hour repeats runs once, in
its first pass; the repeated hour is not run again.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from gateway.errors import JobError
from gateway.scheduler.model import JobKind

__all__ = ["Schedule", "local_zone", "parse_schedule", "stored_schedule"]

_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
          "d": 86400, "day": 86400}
_SPAN = re.compile(r"^(?P<n>\d+)\s*(?P<unit>s|secs?|seconds?|m|mins?|minutes?|h|hours?|d|days?)$", re.I)
_ALIASES = frozenset({"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"})
#: how many later occurrences of a cron expression are looked at for its shortest gap
_GAP_SAMPLES = 12
#: a cron expression that matches nothing for this many candidates (Feb 30) is refused
_MAX_CANDIDATES = 2000
_HELP = ("Use a cron expression (\"0 8 * * 1-5\"), an interval (\"every 30m\", \"every 2h\", \"every 1d\"), "
         "or one time (\"in 2h\", \"2026-12-01T08:00\").")


def local_zone(name: str | None) -> ZoneInfo:
    """``cron.timezone``, or the system's zone (UTC when it has no IANA name)."""
    if name:
        return ZoneInfo(name)
    try:
        with open("/etc/timezone", encoding="utf-8") as f:
            return ZoneInfo(f.read().strip())
    except (OSError, ValueError, KeyError):
        pass
    try:
        link = os.readlink("/etc/localtime")
        return ZoneInfo(link.split("zoneinfo/", 1)[1])
    except (OSError, IndexError, ValueError, KeyError):
        return ZoneInfo("UTC")


def _span(text: str) -> float | None:
    m = _SPAN.match(text.strip())
    if m is None:
        return None
    unit = m.group("unit").lower().rstrip("s") or "s"
    return int(m.group("n")) * _UNITS[unit if unit in _UNITS else unit[0]]


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: its kind and (for a one-shot) its time, or its interval."""

    text: str
    kind: JobKind
    zone: ZoneInfo
    interval: float | None = None
    at: float | None = None

    def first_due(self, created_at: float) -> float | None:
        if self.kind == "once":
            return self.at
        if self.kind == "every":
            assert self.interval is not None
            return created_at + self.interval
        return self._cron_after(created_at)

    def next_after(self, due: float, now: float) -> float | None:
        """The first due time after both ``due`` (the one just claimed) and ``now``."""
        if self.kind == "once":
            return None
        after = max(due, now)
        if self.kind == "every":
            assert self.interval is not None
            steps = int((after - due) // self.interval) + 1
            return due + steps * self.interval
        return self._cron_after(after)

    def missed_between(self, due: float, now: float, *, cap: int = 1000) -> int:
        """How many due times after ``due`` fell at or before ``now`` (at most ``cap``)."""
        if self.kind == "once" or now <= due:
            return 0
        if self.kind == "every":
            assert self.interval is not None
            return min(cap, int((now - due) // self.interval))
        count, t = 0, due
        while count < cap:
            nxt = self._cron_after(t)
            if nxt is None or nxt > now:
                break
            count, t = count + 1, nxt
        return count

    def shortest_gap(self, start: float) -> float:
        """The smallest gap between runs (cron: over its next few occurrences)."""
        if self.kind == "every":
            assert self.interval is not None
            return self.interval
        if self.kind == "once":
            return float("inf")
        times: list[float] = []
        t = start
        for _ in range(_GAP_SAMPLES):
            nxt = self._cron_after(t)
            if nxt is None:
                break
            times.append(nxt)
            t = nxt
        gaps = [b - a for a, b in itertools.pairwise(times)]
        return min(gaps) if gaps else float("inf")

    def _cron_after(self, ts: float) -> float | None:
        """The first instant after ``ts`` a cron expression names, in wall-clock time of the zone."""
        wall = dt.datetime.fromtimestamp(ts, self.zone).replace(tzinfo=None)
        try:
            it = croniter(self.text, wall)
            for _ in range(_MAX_CANDIDATES):
                instant = _instant(it.get_next(dt.datetime), self.zone)
                if instant > ts:
                    return instant
        except (CroniterBadDateError, ValueError, OverflowError):
            return None
        return None


def _instant(wall: dt.datetime, zone: ZoneInfo) -> float:
    """The instant of a local wall-clock time: its first pass when the fall-back hour repeats it,
    the end of the gap when spring-forward skips it."""
    first = wall.replace(tzinfo=zone, fold=0)
    back = dt.datetime.fromtimestamp(first.timestamp(), zone).replace(tzinfo=None)
    if back == wall:
        return first.timestamp()
    # In the gap: fold=1 reads it with the offset before the change, fold=0 with the one after;
    # the change itself lies between the two instants. Found to the second by bisection.
    lo, hi = sorted((wall.replace(tzinfo=zone, fold=1).timestamp(), first.timestamp()))
    before = dt.datetime.fromtimestamp(lo, zone).utcoffset()
    while hi - lo > 1:
        mid = (lo + hi) / 2
        if dt.datetime.fromtimestamp(mid, zone).utcoffset() == before:
            lo = mid
        else:
            hi = mid
    return float(int(hi))


def stored_schedule(text: str, kind: str, zone: ZoneInfo, at: float | None) -> Schedule:
    """A schedule as a job stores it (checked when it was made; nothing is refused here)."""
    if kind == "every":
        return Schedule(text, "every", zone, interval=_span(text.split(None, 1)[1]))
    if kind == "once":
        return Schedule(text, "once", zone, at=at)
    return Schedule(text, "cron", zone)


def parse_schedule(text: str, zone: ZoneInfo, *, now: float, min_interval: float) -> Schedule:
    """The schedule ``text`` names; JobError (what to write instead) when it is not one, lies
    in the past, or runs more often than ``min_interval`` seconds."""
    raw = " ".join(text.split())
    low = raw.lower()
    if not raw:
        raise JobError(f"The schedule is empty. {_HELP}")
    if low.startswith("every "):
        interval = _span(low[6:])
        if interval is None or interval <= 0:
            raise JobError(f"I cannot read the interval {raw!r}. {_HELP}")
        schedule = Schedule(raw, "every", zone, interval=interval)
    elif low.startswith("in "):
        delay = _span(low[3:])
        if delay is None or delay <= 0:
            raise JobError(f"I cannot read the time {raw!r}. {_HELP}")
        at = now + delay
        # Stored as the time it names: "in 2h" means two hours from when it was said.
        iso = dt.datetime.fromtimestamp(at, zone).isoformat(timespec="seconds")
        return Schedule(iso, "once", zone, at=at)
    elif raw[:1].isdigit() and ("-" in raw[:5] or "T" in raw):
        try:
            when = dt.datetime.fromisoformat(raw)
        except ValueError:
            when = None
        if when is None:
            if len(raw.split()) == 5:  # "2026 ..." is no ISO time; maybe a cron expression after all
                return _cron(raw, zone, now, min_interval)
            raise JobError(f"I cannot read the time {raw!r} (write it as 2026-12-01T08:00). {_HELP}")
        at = (_instant(when, zone) if when.tzinfo is None else when.timestamp())
        if at <= now:
            raise JobError(f"{raw} is in the past. Give a time in the future, or \"in 2h\".")
        return Schedule(raw, "once", zone, at=at)
    else:
        return _cron(raw, zone, now, min_interval)
    _check_gap(schedule, now, min_interval)
    return schedule


def _cron(raw: str, zone: ZoneInfo, now: float, min_interval: float) -> Schedule:
    fields = raw.split()
    if not (len(fields) == 5 or (len(fields) == 1 and fields[0].lower() in _ALIASES)):
        raise JobError(f"{raw!r} is not a schedule I know (a cron expression has five fields: "
                       f"minute hour day month weekday). {_HELP}")
    try:
        valid = croniter.is_valid(raw)
    except (CroniterBadCronError, ValueError):
        valid = False
    if not valid:
        raise JobError(f"{raw!r} is not a valid cron expression. {_HELP}")
    schedule = Schedule(raw, "cron", zone)
    if schedule.first_due(now) is None:
        raise JobError(f"{raw!r} never comes due (a date that does not exist?).")
    _check_gap(schedule, now, min_interval)
    return schedule


def _check_gap(schedule: Schedule, now: float, min_interval: float) -> None:
    gap = schedule.shortest_gap(now)
    if gap < min_interval:
        raise JobError(f"{schedule.text!r} runs every {_human(gap)}; jobs may run at most every "
                       f"{_human(min_interval)} (cron.min_interval).")


def _human(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            n = int(seconds // size)
            return f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{seconds:g} seconds"
