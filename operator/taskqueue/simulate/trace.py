"""Traces for the simulator: a CSV file or a built-in generator, as sorted `Arrival`s. Pure.

CSV: one task per row, `enqueued_at,queue,service_seconds`. A header row is optional; one naming
those three columns may put them in any order and add others (ignored), as an export from logs
has them. `enqueued_at` is seconds from any origin, or an ISO 8601 time (`2026-12-01T10:00:00Z`;
without an offset, UTC); the trace is shifted so its first task arrives at 0. Generators (seeded,
so a run is reproducible):

| name         | traffic                                                                       |
|--------------|-------------------------------------------------------------------------------|
| steady       | Poisson arrivals at `rate`/s                                                   |
| bursty       | every 300 s, 30 s at 10 x `rate`, quiet between                                |
| spikes       | batches of 60 x `rate` tasks at once, every ~600 s (exponential gaps)          |
| diurnal      | a rate going 0 -> 2 x `rate` -> 0 over the trace (one "day")                   |
| long         | `rate`/10 tasks/s lasting ~30 x `service` (log-normal)                         |
| two-priority | a high queue at `rate`/s of service/4, and batches on a low queue every 300 s |

Service times are exponential with mean `service` unless said otherwise.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `taskqueue simulate --help` loads no pydantic
    from taskqueue.api.models import ScheduleSpec

HIGH, LOW = "high", "low"
DEFAULT_QUEUE = "tasks"


class TraceError(ValueError):
    """A trace that cannot be read; the message names the row and the fix."""


@dataclass(frozen=True)
class Arrival:
    """One task of a trace."""

    at: float
    queue: str
    service: float
    scheduled: bool = False
    """Fired by a schedule: in the delayed zset (demand due soon) before `at`."""


@dataclass(frozen=True)
class Load:
    """Parameters of a generator."""

    rate: float = 1.0
    service: float = 1.0
    duration: float = 3600.0
    seed: int = 1
    queue: str = DEFAULT_QUEUE


def scheduled(schedules: Iterable[ScheduleSpec], *, start: float, duration: float,
              service: float, seed: int = 1) -> list[Arrival]:
    """The tasks `schedules` fire over (`start`, `start` + `duration`] (unix seconds; the slots
    are the operator's, daylight saving time included), at slot + jitter, as arrivals from 0;
    service times exponential with mean `service`."""
    from taskqueue.api import schedulespec

    rng = random.Random(seed)
    out = [Arrival(schedulespec.due_ms(s, slot) / 1000 - start, s.queue,
                   rng.expovariate(1 / service) if service > 0 else 0.0, scheduled=True)
           for s in schedules if not s.suspend
           for slot in schedulespec.slots(s, after=start, until=start + duration)]
    return sorted(out, key=lambda a: a.at)


def merge(*traces: list[Arrival]) -> list[Arrival]:
    """The arrivals of all `traces`, in time order."""
    return sorted((a for t in traces for a in t), key=lambda a: a.at)


COLUMNS = ("enqueued_at", "queue", "service_seconds")


def read_csv(path: Path) -> list[Arrival]:
    """The arrivals in the CSV at `path`, sorted and shifted to start at 0."""
    out: list[Arrival] = []
    columns: tuple[int, int, int] | None = None
    header = False
    with path.open(newline="", encoding="utf-8-sig") as f:
        for n, row in enumerate(csv.reader(f), start=1):
            if not any(c.strip() for c in row) or row[0].strip().startswith("#"):
                continue
            if not out and not header and all(_time(c.strip()) is None for c in row):
                header, columns = True, _header(row, n, path)
                continue
            out.append(_row(row, n, path, columns))
    if not out:
        raise TraceError(f"{path}: no tasks; write rows of enqueued_at,queue,service_seconds")
    out.sort(key=lambda a: a.at)
    start = out[0].at
    return [Arrival(a.at - start, a.queue, a.service) for a in out]


def _header(row: list[str], n: int, path: Path) -> tuple[int, int, int] | None:
    """Where a header row puts the three columns (None: the header is the plain three)."""
    names = [c.strip().lower() for c in row]
    missing = [c for c in COLUMNS if c not in names]
    if not missing:
        return names.index(COLUMNS[0]), names.index(COLUMNS[1]), names.index(COLUMNS[2])
    if len(names) == len(COLUMNS):
        return None  # a header of other names over the three columns in order
    raise TraceError(f"{path}:{n}: the header has no column {', '.join(missing)}; name the "
                     "columns enqueued_at,queue,service_seconds")


def _time(text: str) -> float | None:
    """Seconds from a number or an ISO 8601 time (UTC without an offset); None if neither."""
    try:
        value = float(text)
    except ValueError:
        try:
            stamp = datetime.fromisoformat(text)
        except ValueError:
            return None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=UTC)
        return stamp.timestamp()
    return value if math.isfinite(value) else None


def _row(row: list[str], n: int, path: Path, columns: tuple[int, int, int] | None) -> Arrival:
    if columns is None and len(row) != len(COLUMNS):
        raise TraceError(f"{path}:{n}: {len(row)} columns; write enqueued_at,queue,service_seconds")
    if columns is not None and len(row) <= max(columns):
        raise TraceError(f"{path}:{n}: {len(row)} columns, fewer than the header names")
    at_text, queue, service_text = (row[i].strip() for i in (columns or (0, 1, 2)))
    at = _time(at_text)
    try:
        service = float(service_text)
    except ValueError:
        service = math.nan
    if at is None or not math.isfinite(service) or service < 0:
        raise TraceError(f"{path}:{n}: enqueued_at must be a number of seconds or an ISO 8601 "
                         f"time and service_seconds a finite number (service >= 0), got "
                         f"{at_text!r}, {service_text!r}")
    if not queue:
        raise TraceError(f"{path}:{n}: empty queue; name the queue key")
    return Arrival(at, queue, service)


def _poisson(rng: random.Random, rate_at: Callable[[float], float], peak: float,
             duration: float) -> Iterable[float]:
    """Arrival times of a Poisson process with rate `rate_at(t)` <= `peak` (thinning)."""
    t = 0.0
    while peak > 0:
        t += rng.expovariate(peak)
        if t >= duration:
            return
        if rng.random() * peak <= rate_at(t):
            yield t


def steady(load: Load) -> list[Arrival]:
    rng = random.Random(load.seed)
    return [Arrival(t, load.queue, rng.expovariate(1 / load.service))
            for t in _poisson(rng, lambda _t: load.rate, load.rate, load.duration)]


def bursty(load: Load) -> list[Arrival]:
    rng = random.Random(load.seed)
    high = 10 * load.rate
    def rate(t: float) -> float:
        return high if t % 300 < 30 else 0.0
    return [Arrival(t, load.queue, rng.expovariate(1 / load.service))
            for t in _poisson(rng, rate, high, load.duration)]


def spikes(load: Load) -> list[Arrival]:
    rng = random.Random(load.seed)
    out, t = [], rng.expovariate(1 / 600)
    while t < load.duration:
        out += [Arrival(t, load.queue, rng.expovariate(1 / load.service))
                for _ in range(max(1, round(60 * load.rate)))]
        t += rng.expovariate(1 / 600)
    return out


def diurnal(load: Load) -> list[Arrival]:
    rng = random.Random(load.seed)
    peak = 2 * load.rate
    def rate(t: float) -> float:
        return peak * (0.5 - 0.5 * math.cos(2 * math.pi * t / load.duration))
    return [Arrival(t, load.queue, rng.expovariate(1 / load.service))
            for t in _poisson(rng, rate, peak, load.duration)]


def long_tasks(load: Load) -> list[Arrival]:
    rng = random.Random(load.seed)
    mean, sigma = 30 * load.service, 0.5
    mu = math.log(mean) - sigma * sigma / 2
    rate = load.rate / 10
    return [Arrival(t, load.queue, rng.lognormvariate(mu, sigma))
            for t in _poisson(rng, lambda _t: rate, rate, load.duration)]


def two_priority(load: Load) -> list[Arrival]:
    rng = random.Random(load.seed)
    out = [Arrival(t, HIGH, rng.expovariate(4 / load.service))
           for t in _poisson(rng, lambda _t: load.rate, load.rate, load.duration)]
    t = 60.0
    while t < load.duration:
        out += [Arrival(t + i * 0.01, LOW, rng.expovariate(1 / load.service))
                for i in range(max(1, round(60 * load.rate)))]
        t += 300
    return sorted(out, key=lambda a: a.at)


GENERATORS: dict[str, Callable[[Load], list[Arrival]]] = {
    "steady": steady,
    "bursty": bursty,
    "spikes": spikes,
    "diurnal": diurnal,
    "long": long_tasks,
    "two-priority": two_priority,
}


def generate(name: str, load: Load) -> list[Arrival]:
    """The trace of generator `name`; TraceError naming the choices for an unknown one."""
    try:
        make = GENERATORS[name]
    except KeyError:
        raise TraceError(
            f"unknown generator {name!r}; use one of {', '.join(GENERATORS)}") from None
    return sorted(make(load), key=lambda a: a.at)
