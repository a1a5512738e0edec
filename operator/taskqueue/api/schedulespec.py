"""`spec.schedules`: cron schedules that enqueue a task per slot, and the slots they have. Pure.

A schedule's *slots* are the instants its cron expression names in its time zone. The cron
expressions are parsed and iterated by `cronsim` (the parser Healthchecks.io runs on millions of
checks: strict, follows Debian cron, zoneinfo time zones, a seconds field) rather than `croniter`
(declared abandoned by its author in 2024, since taken over by pallets-eco with few releases) or
a parser of our own. Five fields (minute resolution), six fields with seconds first
(`*/10 * * * * *`: every 10 seconds), or a macro (`@hourly`, `@daily`, ...).

Daylight saving time, the one rule: a local wall time is one slot. A wall time that does not
exist (the hour skipped in spring) fires once at the next valid instant (cronsim's rule for
fixed times; a wildcard hour has no slot in the skipped hour); a wall time that occurs twice
(the hour repeated in autumn) fires once, at its first occurrence.

A slot's task: id `<id or name>:<slot as UTC, RFC 3339>`, due at the slot plus a jitter that is
stable per slot (a hash of the id, below `jitterSeconds`), enqueue time the slot.
"""

from __future__ import annotations

import datetime
import hashlib
import zoneinfo
from collections.abc import Iterator
from functools import lru_cache
from typing import Literal

import cronsim
from pydantic import Field, field_validator

from taskqueue.api import limits
from taskqueue.api.statusschema import SpecModel

Overlap = Literal["Allow", "Skip"]

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ID_PATTERN = r"^[^\x00-\x20\x7f]{1,200}$"
CRON_FIELDS_PATTERN = r"^(@[A-Za-z]+|[^\x00-\x20\x7f]+( [^\x00-\x20\x7f]+){4,5})$"
"""The shape of a cron expression the API server checks (the parse is the operator's)."""
ZONE_PATTERN = r"^[A-Za-z0-9_+\-/]{1,64}$"
MAX_SCHEDULES = 64
"""Schedules per TaskQueue (each poll computes and fires the slots of every one)."""

MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The macros Vixie cron knows (`@reboot` has no slots, so it is not one)."""


class ScheduleSpec(SpecModel):
    """One schedule: a task into `queue` at every slot of `cron` in `timeZone`."""

    name: str = Field(min_length=1, max_length=63, pattern=NAME_PATTERN,
                      description="Unique in the TaskQueue (a DNS label); names the slots' "
                      "task ids.")
    cron: str = Field(min_length=1, max_length=200,
                      description="Cron expression: 5 fields (minute hour day month weekday), "
                      "6 with seconds first, or @hourly, @daily, @weekly, @monthly, @yearly.")
    timeZone: str = Field(default="UTC", pattern=ZONE_PATTERN,
                          description="IANA time zone of the expression (e.g. Europe/Berlin).")
    queue: str = Field(min_length=1, max_length=512,
                       description="Key of the queue (one of spec.queues) the tasks go to.")
    payload: str = Field(default="", max_length=65536, description="Each task's payload.")
    id: str | None = Field(default=None, pattern=ID_PATTERN,
                           description="Task id prefix (default: the name); the task of a slot "
                           "is '<id>:<slot in UTC, RFC 3339>'.")
    overlap: Overlap = Field(default="Allow",
                             description="Allow: enqueue every slot. Skip: skip a slot while the "
                             "previous slot's task is queued, delayed or running.")
    catchUpSeconds: float = Field(default=300.0, ge=0, le=limits.MAX_WINDOW_SECONDS,
                                  description="After operator downtime, slots missed within this "
                                  "many seconds are still fired (once each); older ones are "
                                  "counted as missed.")
    suspend: bool = Field(default=False, description="Stop firing (slots are neither fired nor "
                          "counted as missed) without deleting the schedule.")
    jitterSeconds: float = Field(default=0.0, ge=0, le=3600,
                                 description="Delay each slot's task by a stable offset below "
                                 "this, to spread many schedules.")

    @field_validator("cron")
    @classmethod
    def _parses(cls, cron: str) -> str:
        problem = cron_problem(cron)
        if problem:
            raise ValueError(problem)
        return cron

    @field_validator("timeZone")
    @classmethod
    def _known_zone(cls, zone: str) -> str:
        if zone_of(zone) is None:
            raise ValueError(f"unknown time zone {zone!r}; use an IANA name such as "
                             "'Europe/Berlin' or 'UTC'")
        return zone

    @property
    def task_prefix(self) -> str:
        return self.id or self.name

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        zone = zone_of(self.timeZone)
        assert zone is not None  # checked by the validator
        return zone


def expression(cron: str) -> str:
    """`cron` with a macro replaced by its fields."""
    text = cron.strip()
    return MACROS.get(text.lower(), text)


def cron_problem(cron: str) -> str | None:
    """Why `cron` is not a cron expression this project fires (one line), None when it is."""
    text = expression(cron)
    if text.startswith("@"):
        return (f"cron {cron!r}: unknown macro; use one of {', '.join(sorted(MACROS))} or five "
                "fields")
    try:
        it = cronsim.CronSim(text, datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC))
    except cronsim.CronSimError as e:
        return (f"cron {cron!r}: {e}; use five fields 'minute hour day month weekday' "
                "(e.g. '*/15 * * * *'), six with seconds first, or a macro such as @hourly")
    try:
        next(it)
    except StopIteration:
        return f"cron {cron!r} never fires (no matching date in 50 years)"
    return None


@lru_cache(maxsize=512)
def zone_of(name: str) -> zoneinfo.ZoneInfo | None:
    """The IANA zone `name`, None when unknown."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


def _repeated(local: datetime.datetime) -> bool:
    """`local` is the second occurrence of a wall time the autumn change repeats."""
    return local.utcoffset() != local.replace(fold=0).utcoffset()


_GAPS: dict[tuple[str, str], tuple[float, float]] = {}
"""(expression, zone) -> (t, n): no slot in (t, n), and n is one. Lets a poll skip the cron
iteration of a schedule whose next slot lies beyond its window (most of them, most polls)."""
_GAPS_MAX = 100_000


def slots(schedule: ScheduleSpec, *, after: float, until: float,
          limit: int = 100_000) -> Iterator[float]:
    """The slots (unix seconds, whole) in (`after`, `until`], at most `limit` of them."""
    key = (expression(schedule.cron), schedule.timeZone)
    gap = _GAPS.get(key)
    if gap is not None and gap[0] <= after and until < gap[1]:
        return
    zone = schedule.zone
    start = datetime.datetime.fromtimestamp(int(after // 1), zone)
    count, last = 0, after
    for local in cronsim.CronSim(key[0], start):
        ts = local.timestamp()
        if ts <= after or _repeated(local):
            continue
        if ts > until or count >= limit:
            if ts > until:
                if len(_GAPS) >= _GAPS_MAX:
                    _GAPS.clear()
                _GAPS[key] = (last, ts)
            return
        count, last = count + 1, ts
        yield ts


def next_slots(schedule: ScheduleSpec, *, after: float, count: int) -> list[float]:
    """The next `count` slots after `after` (unix seconds)."""
    return list(slots(schedule, after=after, until=float("inf"), limit=count))


def slot_text(slot: float) -> str:
    """A slot in UTC as RFC 3339 (to the second)."""
    return datetime.datetime.fromtimestamp(slot, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def task_id(schedule: ScheduleSpec, slot: float) -> str:
    """The deterministic id of the task of `slot`: '<id or name>:<slot in UTC>'."""
    return f"{schedule.task_prefix}:{slot_text(slot)}"


def jitter_ms(schedule: ScheduleSpec, slot: float) -> int:
    """The stable delay of `slot`'s task, in ms below `jitterSeconds` (a hash of its id)."""
    span = int(schedule.jitterSeconds * 1000)
    if span <= 0:
        return 0
    digest = hashlib.sha1(task_id(schedule, slot).encode()).digest()
    return int.from_bytes(digest[:8], "big") % span


def due_ms(schedule: ScheduleSpec, slot: float) -> int:
    """When `slot`'s task is due (unix ms): the slot plus its jitter."""
    return round(slot * 1000) + jitter_ms(schedule, slot)
