"""spec.schedules: validation (one line naming the field and the fix) and the slots of a
schedule over whole years in zones with daylight saving time, north and south, checked against
a brute-force walk of the UTC clock (no cron library in the oracle)."""

from __future__ import annotations

import datetime
import re
import zoneinfo
from typing import Any

import pytest
from pydantic import ValidationError

from taskqueue.api import manifest, schedulespec
from taskqueue.api.models import ScheduleSpec, TaskQueueSpec


def _spec(*schedules: dict[str, Any]) -> TaskQueueSpec:
    return TaskQueueSpec.model_validate({
        "redis": {"url": "redis://r:6379"}, "queues": [{"key": "q"}, {"key": "r"}],
        "schedules": [{"queue": "q", **s} for s in schedules]})


@pytest.mark.parametrize(("schedules", "message"), [
    ([{"name": "a", "cron": "61 * * * *"}], "cron '61 * * * *': Bad minute; use five fields"),
    ([{"name": "a", "cron": "* * *"}], "Wrong number of fields"),
    ([{"name": "a", "cron": "0 0 31 2 *"}], "Bad day-of-month"),
    ([{"name": "a", "cron": "@reboot"}], "unknown macro; use one of @annually"),
    ([{"name": "a", "cron": "* * * * *", "timeZone": "Mars/Olympus"}],
     "unknown time zone 'Mars/Olympus'; use an IANA name"),
    ([{"name": "a", "cron": "* * * * *", "queue": "nope"}],
     "schedules[0].queue 'nope' is not in spec.queues; use the key of one of ['q', 'r']"),
    ([{"name": "a", "cron": "@daily"}, {"name": "a", "cron": "@hourly"}],
     "schedules[1].name 'a' is used twice"),
    ([{"name": "Bad_Name", "cron": "@daily"}], "schedules.0.name"),
    ([{"name": "a", "cron": "@daily", "overlap": "Forbid"}], "schedules.0.overlap"),
])
def test_a_bad_schedule_is_refused_with_one_line(schedules: list[dict[str, Any]],
                                                 message: str) -> None:
    with pytest.raises(ValidationError, match=r"(?s).*" + re.escape(message)):
        _spec(*schedules)


def test_a_manifest_error_names_the_schedule_field() -> None:
    body = {"kind": "TaskQueue", "spec": {"redis": {"url": "redis://r"},
                                          "queues": [{"key": "q"}],
                                          "schedules": [{"name": "a", "cron": "* * *",
                                                         "queue": "q"}]}}
    with pytest.raises(manifest.ManifestError) as e:
        manifest.parse(body)
    assert str(e.value) == (
        "spec.schedules[0].cron: cron '* * *': Wrong number of fields; use five fields 'minute "
        "hour day month weekday' (e.g. '*/15 * * * *'), six with seconds first, or a macro "
        "such as @hourly")


@pytest.mark.parametrize(("cron", "first_two"), [
    ("@hourly", ("2026-01-01T01:00:00Z", "2026-01-01T02:00:00Z")),
    ("@daily", ("2026-01-02T00:00:00Z", "2026-01-03T00:00:00Z")),
    ("*/20 * * * * *", ("2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z")),
    ("0 9 * * MON", ("2026-01-05T09:00:00Z", "2026-01-12T09:00:00Z")),
])
def test_the_next_slots(cron: str, first_two: tuple[str, str]) -> None:
    s = ScheduleSpec(name="a", cron=cron, queue="q")
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC).timestamp()
    got = schedulespec.next_slots(s, after=start, count=2)
    assert tuple(schedulespec.slot_text(t) for t in got) == first_two


def test_jitter_is_stable_per_slot_and_below_the_bound() -> None:
    s = ScheduleSpec(name="a", cron="* * * * *", queue="q", jitterSeconds=30)
    slots = schedulespec.next_slots(s, after=0, count=200)
    offsets = [schedulespec.jitter_ms(s, t) for t in slots]
    assert offsets == [schedulespec.jitter_ms(s, t) for t in slots]
    assert all(0 <= o < 30_000 for o in offsets) and len(set(offsets)) > 150
    assert schedulespec.due_ms(s, slots[0]) == slots[0] * 1000 + offsets[0]


ZONES = ("Europe/Berlin", "Australia/Sydney", "America/Santiago")
YEAR = 2026


def _year(zone: zoneinfo.ZoneInfo) -> tuple[float, float]:
    start = datetime.datetime(YEAR, 1, 1, tzinfo=zone).timestamp()
    return start - 1, datetime.datetime(YEAR + 1, 1, 1, tzinfo=zone).timestamp() - 1


def _first_occurrence(t: float, zone: zoneinfo.ZoneInfo) -> bool:
    """The wall time of `t` did not occur earlier (autumn's repeated hour: second time)."""
    local = datetime.datetime.fromtimestamp(t, zone)
    return local.utcoffset() == local.replace(fold=0).utcoffset()


@pytest.mark.parametrize("zone_name", ZONES)
def test_every_15_minutes_fires_each_wall_time_once_over_a_year(zone_name: str) -> None:
    zone = zoneinfo.ZoneInfo(zone_name)
    after, until = _year(zone)
    s = ScheduleSpec(name="a", cron="*/15 * * * *", queue="q", timeZone=zone_name)
    got = list(schedulespec.slots(s, after=after, until=until, limit=10**6))
    # oracle: every UTC quarter hour (each zone's offsets are whole quarter hours) whose wall
    # time occurs for the first time
    expected = [float(t) for t in range(int(after) + 1, int(until) + 1, 900)
                if _first_occurrence(t, zone)]
    assert got == expected
    walls = [datetime.datetime.fromtimestamp(t, zone).replace(tzinfo=None) for t in got]
    assert len(walls) == len(set(walls))
    repeated = sum(1 for t in range(int(after) + 1, int(until) + 1, 900)
                   if not _first_occurrence(t, zone))
    assert repeated == 4  # the repeated hour of the autumn change: its 4 quarters fired once


def _next_valid(day: datetime.date, hour: int, minute: int, zone: zoneinfo.ZoneInfo) -> float:
    """The first instant whose wall time on `day` is at or after hour:minute (brute force)."""
    t = int(datetime.datetime(day.year, day.month, day.day, tzinfo=datetime.UTC).timestamp())
    t -= 14 * 3600
    while True:
        local = datetime.datetime.fromtimestamp(t, zone)
        if local.date() == day and (local.hour, local.minute) >= (hour, minute):
            return float(t)
        t += 60


@pytest.mark.parametrize("zone_name", ZONES)
def test_half_past_two_fires_once_a_day_at_the_documented_instant(zone_name: str) -> None:
    zone = zoneinfo.ZoneInfo(zone_name)
    after, until = _year(zone)
    s = ScheduleSpec(name="a", cron="30 2 * * *", queue="q", timeZone=zone_name)
    got = list(schedulespec.slots(s, after=after, until=until))
    days = [datetime.date(YEAR, 1, 1) + datetime.timedelta(days=i) for i in range(365)]
    assert got == [_next_valid(d, 2, 30, zone) for d in days]
    shifted = [t for t in got if datetime.datetime.fromtimestamp(t, zone).hour != 2]
    # Berlin and Sydney skip 02:00-03:00 once a year (fired at 03:00); Santiago changes at
    # midnight, so its 02:30 always exists
    assert len(shifted) == (0 if zone_name == "America/Santiago" else 1)
    assert all(datetime.datetime.fromtimestamp(t, zone).strftime("%H:%M") == "03:00"
               for t in shifted)


@pytest.mark.parametrize("cron", ["30 2 * * *", "*/15 * * * *", "0 9 * * MON-FRI"])
def test_polls_moving_forward_see_the_slots_of_one_walk(cron: str) -> None:
    s = ScheduleSpec(name="a", cron=cron, queue="q", timeZone="Europe/Berlin")
    start = datetime.datetime(2026, 10, 23, tzinfo=datetime.UTC).timestamp()
    walk = list(schedulespec.slots(s, after=start, until=start + 4 * 86400))
    polled = [t for k in range(4 * 144)
              for t in schedulespec.slots(s, after=start + k * 600, until=start + (k + 1) * 600)]
    assert polled == walk
