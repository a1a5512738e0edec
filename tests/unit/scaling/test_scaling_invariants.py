"""What the operator's scaling guarantees on any manifest and any traffic, checked on seeded random
ones through the simulator (the real `policy.decide` and scale-in; pure, no Redis, no cluster).

Whatever the spec and the trace: no task is interrupted or left unserved, no busy pod is
deleted, the replica count stays within [minReplicas, maxReplicas], and a TaskQueue that may
reach zero does so within idleCooldownSeconds + one poll of its last completion. The manifests
draw every scaling field (steps, windows, cooldowns, drain and wait targets, expected service
times, priorities) and the traces mix Poisson streams, bursts, single batches, ramps and on/off
traffic with exponential, constant and heavy-tailed tasks from sub-millisecond to minutes.
And `policy.decide` itself, fed garbage (counters that jump and reset, clock steps back and by
days, 0 ms and hour-long service totals, Redis errors), always decides, promptly and within the
bounds.

    TASKQUEUE_INVARIANT_SEEDS=2000 pytest tests/unit/scaling/test_scaling_invariants.py  # longer
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable
from typing import Any

import pytest

from taskqueue.api.models import TaskQueue
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.policy import PolicyState, decide
from taskqueue.simulate.run import Result, Settings, simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.simulate.trace import Arrival
from taskqueue.wire import keys

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


class GarbageCounters:
    """Stats-hash counters as a broken or restarted fleet may leave them: jumps of any size,
    resets to zero, service totals of 0 ms or of hours, wait histograms that do not add up."""

    def __init__(self, rng: random.Random, queues: list[str]) -> None:
        self.rng, self.queues = rng, queues
        self.reset()

    def reset(self) -> None:
        self.completed = self.failed = 0
        self.taken = dict.fromkeys(self.queues, 0)
        self.service: dict[str, tuple[float, int]] = dict.fromkeys(self.queues, (0.0, 0))
        self.squares = dict(self.service)
        self.waited = {q: (0,) * (len(keys.WAIT_EDGES_SECONDS) + 1) for q in self.queues}

    def advance(self) -> None:
        rng = self.rng
        if rng.random() < 0.03:
            self.reset()
        self.completed += rng.choice([0, 0, 1, 10, 1000])
        self.failed += rng.choice([0, 0, 1])
        for q in self.queues:
            n = rng.choice([0, 1, 10, 1000])
            ms = rng.choice([0, 0, 1, 100, 10**6]) * n
            self.taken[q] += n
            self.service[q] = (self.service[q][0] + ms, self.service[q][1] + n)
            self.squares[q] = (self.squares[q][0] + ms * ms, self.squares[q][1] + n)
            self.waited[q] = tuple(w + (n if i == 0 else rng.randint(0, n))
                                   for i, w in enumerate(self.waited[q]))


def garbage_observation(rng: random.Random, counters: GarbageCounters, at: float,
                        concurrency: int) -> QueueObservation | None:
    if rng.random() < 0.05:
        return None  # Redis unreachable
    counters.advance()
    workers = tuple(
        WorkerObservation(worker_id=f"w{i}", deadline_ms=int((at + rng.choice([-10, 15])) * 1000),
                          in_flight=rng.choice([0, 1, concurrency, concurrency + 3]))
        for i in range(rng.choice([0, 1, 3, 30])))
    queues = counters.queues
    return QueueObservation(
        at=at, backlog={q: rng.choice([0, 0, 1, 10, 10**5]) for q in queues},
        delayed=rng.choice([0, 5]), completed_total=counters.completed,
        failed_total=counters.failed, workers=workers,
        oldest_enqueued_at={q: at - rng.choice([0, 1, 100, 1e6, -5]) for q in queues
                            if rng.random() < 0.7},
        due_soon=rng.choice([0, 0, 3]), taken=dict(counters.taken),
        service=dict(counters.service), service_sq=dict(counters.squares),
        waited=dict(counters.waited))


@pytest.mark.parametrize("seed", range(SEEDS // 2))
def test_the_policy_decides_within_bounds_on_any_observations(seed: int) -> None:
    # clock steps from -100 s to a day, counters that jump and reset, service totals of 0 ms
    # (a poll raised ZeroDivisionError), rates decayed over days, loads of millions of erlangs
    # (a poll took minutes): every poll still decides, within [minReplicas, maxReplicas]
    rng = random.Random(seed)
    tq = random_manifest(rng)
    spec, concurrency = tq.spec.scaling, tq.spec.worker.concurrency
    queues = tuple(q.key for q in tq.spec.queues)
    counters = GarbageCounters(rng, list(queues))
    state, now = PolicyState(replicas=rng.choice([0, 1, 5, 100])), 1.7e9
    for _ in range(100):
        now += (rng.choice([0.0, 0.001, 1, 2, 5, 60, 3600, 86400]) if rng.random() > 0.05
                else -rng.choice([1, 100]))
        observation = garbage_observation(rng, counters, now, concurrency)
        decision = decide(spec=spec, observation=observation, state=state, now=now,
                          concurrency=concurrency, queue_order=queues)
        in_bounds = spec.minReplicas <= decision.replicas <= spec.maxReplicas
        held = decision.replicas == state.replicas  # paused, or Redis down without fallback
        assert in_bounds or held, (decision.reason, state.replicas)
        state = decision.state
