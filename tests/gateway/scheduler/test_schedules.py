"""The three schedule forms, their next due times in a zone with daylight saving time, and
what is refused (too often, in the past, unreadable)."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import pytest

from gateway.errors import JobError
from gateway.scheduler.schedules import parse_schedule, stored_schedule

BERLIN = ZoneInfo("Europe/Berlin")


def at(*args: int) -> float:
    return dt.datetime(*args, tzinfo=BERLIN).timestamp()


def local(ts: float | None) -> str:
    assert ts is not None
    return dt.datetime.fromtimestamp(ts, BERLIN).strftime("%Y-%m-%d %H:%M %Z")


def runs(text: str, start: float, n: int) -> list[str]:
    schedule = parse_schedule(text, BERLIN, now=start, min_interval=60)
    out, t = [], start
    for _ in range(n):
        nxt = schedule.next_after(t, t)
        assert nxt is not None
        out.append(local(nxt))
        t = nxt
    return out


def test_a_weekday_cron_expression_skips_the_weekend() -> None:
    # 2026-11-27 is a Friday
    assert runs("0 8 * * 1-5", at(2026, 11, 27, 9, 0), 2) == ["2026-11-30 08:00 CET", "2026-12-01 08:00 CET"]


def test_a_time_the_spring_gap_skips_runs_once_at_its_end() -> None:
    # 2026-03-29: 02:00 CET becomes 03:00 CEST; 02:30 does not exist that day
    assert runs("30 2 * * *", at(2026, 3, 28, 12, 0), 3) == [
        "2026-03-29 03:00 CEST", "2026-03-30 02:30 CEST", "2026-03-31 02:30 CEST"]


def test_several_times_in_the_spring_gap_run_once_together() -> None:
    assert runs("*/30 * * * *", at(2026, 3, 29, 1, 20), 3) == [
        "2026-03-29 01:30 CET", "2026-03-29 03:00 CEST", "2026-03-29 03:30 CEST"]


def test_a_time_the_fall_back_hour_repeats_runs_once() -> None:
    # 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens twice that night
    assert runs("30 2 * * *", at(2026, 10, 24, 12, 0), 3) == [
        "2026-10-25 02:30 CEST", "2026-10-26 02:30 CET", "2026-10-27 02:30 CET"]


def test_the_repeated_hour_is_not_run_again() -> None:
    assert runs("0 * * * *", at(2026, 10, 25, 0, 30), 4) == [
        "2026-10-25 01:00 CEST", "2026-10-25 02:00 CEST", "2026-10-25 03:00 CET", "2026-10-25 04:00 CET"]


def test_an_interval_is_elapsed_time_from_creation_across_dst() -> None:
    start = at(2026, 3, 28, 12, 0)
    schedule = parse_schedule("every 1d", BERLIN, now=start, min_interval=60)
    first = schedule.first_due(start)
    assert first == start + 86400
    assert local(first) == "2026-03-29 13:00 CEST"  # 24 hours later, across the change
    assert schedule.next_after(start + 86400, start + 86400 + 10) == start + 2 * 86400


def test_an_interval_after_downtime_moves_to_the_next_point_of_its_grid() -> None:
    schedule = parse_schedule("every 30m", BERLIN, now=0, min_interval=60)
    assert schedule.next_after(1800, 1800 + 4000) == 1800 + 3 * 1800
    assert schedule.missed_between(1800, 1800 + 4000) == 2


def test_missed_cron_times_are_counted() -> None:
    schedule = parse_schedule("0 * * * *", BERLIN, now=at(2026, 11, 1, 0, 0), min_interval=60)
    assert schedule.missed_between(at(2026, 11, 1, 1, 0), at(2026, 11, 1, 5, 30)) == 4


@pytest.mark.parametrize("text", ["in 2h", "in 90 minutes", "in 1d"])
def test_in_a_while_is_stored_as_the_time_it_names(text: str) -> None:
    now = at(2026, 11, 27, 9, 0)
    schedule = parse_schedule(text, BERLIN, now=now, min_interval=60)
    assert schedule.kind == "once" and schedule.at is not None and schedule.at > now
    assert dt.datetime.fromisoformat(schedule.text).timestamp() == schedule.at
    assert schedule.next_after(schedule.at, schedule.at) is None


def test_an_iso_time_is_local_unless_it_has_an_offset() -> None:
    now = at(2026, 11, 27, 9, 0)
    assert parse_schedule("2026-12-01T08:00", BERLIN, now=now, min_interval=60).at == at(2026, 12, 1, 8, 0)
    utc = parse_schedule("2026-12-01T08:00+00:00", BERLIN, now=now, min_interval=60)
    assert utc.at == dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC).timestamp()


@pytest.mark.parametrize(("text", "says"), [
    ("2020-01-01T08:00", "in the past"),
    ("every 30s", "at most every 1 minute"),
    ("*/1 * * * *", None),  # exactly a minute: allowed
    ("0,0 * * * *", None),
    ("* * * * * *", "five fields"),
    ("61 * * * *", "not a valid cron expression"),
    ("every now and then", "cannot read the interval"),
    ("in a bit", "cannot read the time"),
    ("", "empty"),
    ("0 0 30 2 *", "never comes due"),
    ("soon", "not a schedule I know"),
])
def test_bad_schedules_are_refused_with_what_to_write(text: str, says: str | None) -> None:
    now = at(2026, 11, 27, 9, 0)
    if says is None:
        parse_schedule(text, BERLIN, now=now, min_interval=60)
        return
    with pytest.raises(JobError, match=says):
        parse_schedule(text, BERLIN, now=now, min_interval=60)


def test_a_cron_expression_more_often_than_min_interval_is_refused() -> None:
    now = at(2026, 11, 27, 9, 0)
    with pytest.raises(JobError, match=r"cron\.min_interval"):
        parse_schedule("*/5 * * * *", BERLIN, now=now, min_interval=600)
    # the smallest gap counts, not the average: 8:00 and 8:01 every day
    with pytest.raises(JobError, match="every 1 minute"):
        parse_schedule("0,1 8 * * *", BERLIN, now=now, min_interval=120)


def test_a_stored_schedule_reads_back_without_checks() -> None:
    assert stored_schedule("every 2h", "every", BERLIN, None).interval == 7200
    assert stored_schedule("0 8 * * *", "cron", BERLIN, None).next_after(0, at(2026, 11, 27, 9, 0)) == \
        at(2026, 11, 28, 8, 0)
