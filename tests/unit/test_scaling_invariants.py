"""What the operator's scaling guarantees on any manifest and any traffic, checked on seeded random
ones through the simulator (the real `policy.decide` and scale-in; pure, no Redis, no cluster).

Whatever the spec and the trace: no task is interrupted or left unserved, no busy pod is
deleted, the replica count stays within [minReplicas, maxReplicas], and a TaskQueue that may
reach zero does so within idleCooldownSeconds + one poll of its last completion. The manifests
draw every scaling field (steps, windows, cooldowns, drain and wait targets, expected service
times, priorities) and the traces mix Poisson streams, bursts, single batches, ramps and on/off
traffic with exponential, constant and heavy-tailed tasks from sub-millisecond to minutes.

    TASKQUEUE_INVARIANT_SEEDS=2000 pytest tests/unit/test_scaling_invariants.py   # a longer hunt
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from typing import Any

import pytest

from taskqueue.models import TaskQueue
from taskqueue.simulate.run import Result, Settings, simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.simulate.trace import Arrival

SEEDS = int(os.environ.get("TASKQUEUE_INVARIANT_SEEDS", "40"))
MAX_TASKS = 20_000
"""Traces with more tasks are drawn again (they add run time, not cases)."""


def random_manifest(rng: random.Random) -> TaskQueue:
    keys = [f"q{i}" for i in range(rng.choice([1, 1, 2, 3]))]
    low = rng.choice([0, 0, 0, 1, 2])
    scaling: dict[str, Any] = {
        "minReplicas": low,
        "maxReplicas": max(low, rng.choice([1, 3, 10, 30, 60])),
        "pollIntervalSeconds": rng.choice([1, 2, 5, 15]),
        "idleCooldownSeconds": rng.choice([0, 5, 30, 120]),
        "scaleDownStabilizationSeconds": rng.choice([0, 15, 60, 300]),
        "targetBacklogPerReplica": rng.choice([1, 4, 10, 50]),
    }
    if rng.random() < 0.3:
        scaling["maxScaleUpStep"] = rng.choice([1, 3])
    if rng.random() < 0.3:
        scaling["maxScaleDownStep"] = rng.choice([1, 3])
    if rng.random() < 0.2:
        scaling["targetDrainSeconds"] = rng.choice([10, 60])
    if rng.random() < 0.6:
        scaling["targetWaitSeconds"] = {q: rng.choice([0.5, 2, 10, 60]) for q in keys
                                        if rng.random() < 0.8}
    if rng.random() < 0.2:
        scaling["expectedServiceSeconds"] = {q: rng.choice([0.1, 2, 30]) for q in keys}
    queues: list[dict[str, Any]] = [{"key": q} for q in keys]
    if len(keys) > 1 and rng.random() < 0.5:
        queues[0]["starvationLimit"] = rng.choice([1, 3])
    return TaskQueue.model_validate({"spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": queues,
        "worker": {"concurrency": rng.choice([1, 1, 2, 4, 8, 16]),
                   "terminationGracePeriodSeconds": rng.choice([5, 30, 300])},
        "scaling": scaling}})


def service_times(rng: random.Random) -> Callable[[], float]:
    mean = rng.choice([0.0, 0.0002, 0.05, 0.5, 2.0, 20.0, 120.0])
    shape = rng.choice(["exponential", "constant", "heavy"])
    if shape == "constant" or mean == 0:
        return lambda: mean
    if shape == "exponential":
        return lambda: rng.expovariate(1 / mean)
    s2 = math.log(1 + 9)  # log-normal, cv 3
    return lambda: rng.lognormvariate(math.log(mean) - s2 / 2, math.sqrt(s2))


def poisson(rng: random.Random, rate: float, duration: float) -> list[float]:
    times, t = [], 0.0
    while (t := t + rng.expovariate(rate)) < duration:
        times.append(t)
    return times


def bursts(rng: random.Random, _: float, duration: float) -> list[float]:
    times, t = [], 0.0
    while (t := t + rng.expovariate(1 / 120)) < duration:
        times += [t + rng.random() for _ in range(rng.randint(1, 200))]
    return times


def one_batch(rng: random.Random, _: float, duration: float) -> list[float]:
    return [rng.uniform(0, duration)] * rng.randint(1, 500)


def ramp(rng: random.Random, rate: float, duration: float) -> list[float]:
    """Up from nearly nothing and down again over the trace."""
    times, t = [], 0.0
    while (t := t + rng.expovariate(rate * (0.01 + math.sin(math.pi * t / duration)))) \
            < duration:
        times.append(t)
    return times


def on_off(rng: random.Random, rate: float, duration: float) -> list[float]:
    times, t = [], 0.0
    while t < duration:
        end = t + rng.uniform(5, 60)
        times += [t + x for x in poisson(rng, rate, end - t)]
        t = end + rng.uniform(30, 300)
    return times


def silent(*_: Any) -> list[float]:
    return []


TRAFFIC: tuple[Callable[[random.Random, float, float], list[float]], ...] = (
    poisson, bursts, one_batch, ramp, on_off, silent)


def queue_traffic(rng: random.Random, queue: str, concurrency: int,
                  duration: float) -> list[Arrival]:
    service = service_times(rng)
    rate = rng.choice([0.05, 0.5, 2.0, 10.0]) * concurrency / max(service(), 0.5)
    times = rng.choice(TRAFFIC)(rng, rate, duration)
    return [Arrival(at, queue, service()) for at in times if at < duration]


def random_trace(rng: random.Random, tq: TaskQueue) -> list[Arrival]:
    duration = rng.choice([300.0, 900.0, 1800.0])
    out = [a for q in tq.spec.queues
           for a in queue_traffic(rng, q.key, tq.spec.worker.concurrency, duration)]
    return sorted(out, key=lambda a: a.at)


def random_case(seed: int) -> tuple[TaskQueue, list[Arrival], Settings]:
    rng = random.Random(seed)
    while True:
        tq = random_manifest(rng)
        arrivals = random_trace(rng, tq)
        if 0 < len(arrivals) <= MAX_TASKS:
            break
    settings = Settings(startup=rng.choice([1.0, 5.0, 20.0]),
                        dispatch=rng.choice(["pack", "spread"]),
                        history=rng.choice([0, 0, 50]),
                        tail=1200 + tq.spec.scaling.idleCooldownSeconds, seed=seed)
    return tq, arrivals, settings


def broken_guarantees(tq: TaskQueue, result: Result) -> list[str]:
    spec = tq.spec.scaling
    broken = [f"{name} {n}" for name, n in (("tasks interrupted", result.interrupted),
                                             ("busy pods deleted", result.busy_deleted),
                                             ("tasks never completed", result.unserved)) if n]
    counts = [n for _, n in result.scale_log]
    if counts and not spec.minReplicas <= min(counts) <= max(counts) <= spec.maxReplicas:
        broken.append(f"replicas {min(counts)}-{max(counts)} outside "
                      f"[{spec.minReplicas}, {spec.maxReplicas}]")
    if spec.minReplicas == 0:
        limit = spec.idleCooldownSeconds + spec.pollIntervalSeconds + 1.0  # + 1: tick, write
        if result.zero_after is None or result.zero_after > limit:
            broken.append(f"back to zero after {result.zero_after} s, limit {limit:g} s")
    return broken


@pytest.mark.parametrize("seed", range(SEEDS))
def test_every_guarantee_holds_on_a_random_manifest_and_trace(seed: int) -> None:
    tq, arrivals, settings = random_case(seed)
    result = simulate(tq, arrivals, OperatorScaler(tq), settings)
    assert broken_guarantees(tq, result) == [], (
        tq.spec.scaling.model_dump(exclude_defaults=True), tq.spec.worker.concurrency, settings)
