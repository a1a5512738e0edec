"""Traces for the simulator: a CSV file or a built-in generator, as sorted `Arrival`s. Pure.

CSV: one task per row, `enqueued_at,queue,service_seconds` (a header row naming those columns is
optional; times are seconds from the start of the trace, or any origin: they are shifted so the
first task arrives at 0). Generators (seeded, so a run is reproducible):

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
from pathlib import Path

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


@dataclass(frozen=True)
class Load:
    """Parameters of a generator."""

    rate: float = 1.0
    service: float = 1.0
    duration: float = 3600.0
    seed: int = 1
    queue: str = DEFAULT_QUEUE


def read_csv(path: Path) -> list[Arrival]:
    """The arrivals in the CSV at `path`, sorted and shifted to start at 0."""
    out: list[Arrival] = []
    with path.open(newline="") as f:
        for n, row in enumerate(csv.reader(f), start=1):
            if not row or row[0].strip().startswith("#"):
                continue
            if n == 1 and not _is_number(row[0]):
                continue  # header
            out.append(_row(row, n, path))
    if not out:
        raise TraceError(f"{path}: no tasks; write rows of enqueued_at,queue,service_seconds")
    out.sort(key=lambda a: a.at)
    start = out[0].at
    return [Arrival(a.at - start, a.queue, a.service) for a in out]


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _row(row: list[str], n: int, path: Path) -> Arrival:
    if len(row) != 3:
        raise TraceError(f"{path}:{n}: {len(row)} columns; write enqueued_at,queue,service_seconds")
    at, queue, service = (c.strip() for c in row)
    if not (_is_number(at) and _is_number(service)) or float(service) < 0:
        raise TraceError(f"{path}:{n}: enqueued_at and service_seconds must be numbers "
                         f"(service >= 0), got {at!r}, {service!r}")
    if not queue:
        raise TraceError(f"{path}:{n}: empty queue; name the queue key")
    return Arrival(float(at), queue, float(service))


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


def queues_of(trace: Iterable[Arrival]) -> list[str]:
    """Queue names in order of first appearance."""
    return list(dict.fromkeys(a.queue for a in trace))
