"""One simulation: a trace, a TaskQueue and a scaler in, the figures out. Pure (no clock, no I/O).

`simulate()` ticks the world and the scaler until `tail` seconds after the end of the trace and
after the last task was served (so the fleet can drain and go back to zero, also when
`maxReplicas` held it below the load), and returns a `Result`: worker-seconds (the cost: pods
billed from creation to exit), mean replicas over the trace, p50/p95/p99 wait per queue, tasks
interrupted by a deletion, pods deleted while holding a task, replica changes, and how long after
the last completion the fleet first reached zero (a forecast batch that never comes may start it
again after that: `Result.restarts`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from taskqueue.api.models import TaskQueue
from taskqueue.scaling import policy
from taskqueue.simulate.flowsim import FlowSim
from taskqueue.simulate.trace import Arrival
from taskqueue.simulate.world import EXIT_SECONDS, POD_STARTUP_SECONDS, Dispatch, World
from taskqueue.wire import flow


class Scaler(Protocol):
    name: str

    def tick(self, world: World, t: float) -> None: ...


@dataclass(frozen=True)
class Settings:
    """The cluster the simulation models."""

    tick: float = 0.1
    startup: float = POD_STARTUP_SECONDS
    """Seconds from pod creation to a worker taking tasks."""
    exit_delay: float = EXIT_SECONDS
    """Seconds from a drained pod's deletion to its exit (billed)."""
    startup_per_pod: float = 0.0
    """Seconds each other pod starting at the same time adds to a pod's start-up (one small
    node: `world.NODE_STARTUP_PER_POD_SECONDS`)."""
    grace: float | None = None
    """SIGTERM grace (default: the TaskQueue's terminationGracePeriodSeconds)."""
    dispatch: Dispatch = "pack"
    tail: float = 600.0
    seed: int = 1
    sample_every: float = 5.0
    """Timeline sampling period (seconds)."""
    history: int = 0
    """Attempts per queue already in the stats hash's service totals at the start, at the
    trace's mean service time of that queue (a TaskQueue that ran this traffic before: a new
    operator reads the service time at its first poll). 0: a new TaskQueue."""


@dataclass(frozen=True)
class Result:
    scaler: str
    worker_seconds: float
    mean_replicas: float
    max_replicas: int
    waits: dict[str, tuple[float, float, float]]
    """Per queue with tasks in the trace: p50, p95, p99 seconds from enqueue to start."""
    tasks: int
    interrupted: int
    busy_deleted: int
    deleted: int
    zero_after: float | None
    """Seconds from the last completion to the first time at zero replicas after it (None:
    never reached zero)."""
    restarts: int = 0
    """Scale-ups from zero after that (batches forecast after the trace's last one: a
    `policy.Rule.FORECAST` that missed), each released again by the idle rule."""
    unserved: int = 0
    """Tasks not completed by the end of the run (never started, or interrupted again and
    again); one never started counts in the wait percentiles as waiting until the end. A
    task's wait is counted once, at its first start."""
    timeline: tuple[tuple[float, int, int], ...] = field(default=(), repr=False)
    """(time, live pods, queued tasks) every `sample_every` seconds."""
    scale_log: tuple[tuple[float, int], ...] = field(default=(), repr=False)
    """(time, new spec.replicas) of every replica change."""

    @property
    def scale_changes(self) -> int:
        return len(self.scale_log)

    def reversals(self, within: float) -> int:
        """Replica changes undone within `within` seconds: a change whose next change goes the
        other way that soon (flapping, e.g. up then down again a poll or two later)."""
        flips, before = 0, 0
        for (t, n), (t_next, n_next) in zip(self.scale_log, self.scale_log[1:], strict=False):
            if t_next - t <= within and (n - before) * (n_next - n) < 0:
                flips += 1
            before = n
        return flips

    def replicas_between(self, start: float, end: float) -> float:
        """Mean live pods sampled in [start, end) (the steady part of a run)."""
        pods = [p for t, p, _ in self.timeline if start <= t < end]
        return sum(pods) / len(pods) if pods else 0.0

    def p95(self) -> float:
        """The worst p95 over the queues."""
        return max((w[1] for w in self.waits.values()), default=0.0)


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def history(trace: list[Arrival], attempts: int, *,
            power: int = 1) -> dict[str, tuple[float, int]]:
    """Service totals of `attempts` earlier tasks per queue at the trace's mean service time
    (`power` 2: the sums of their squares, at the trace's mean square)."""
    sums: dict[str, list[float]] = {}
    for a in trace:
        sums.setdefault(a.queue, []).append(a.service ** power)
    return {q: (sum(s) / len(s) * attempts, attempts) for q, s in sums.items()}


@dataclass
class _Zeros:
    """The times the fleet reached zero replicas (no pod, none asked for)."""

    starts: list[float] = field(default_factory=list)
    since: float | None = None

    def seen(self, t: float, *, zero: bool) -> None:
        if not zero:
            self.since = None
        elif self.since is None:
            self.since = t
            self.starts.append(t)

    def after(self, t: float) -> tuple[float | None, int]:
        """Seconds from `t` to the first time at zero after it (None: never), and the
        scale-ups from zero after that."""
        later = [z for z in self.starts if z >= t]
        return (later[0] - t, len(later) - 1) if later else (None, 0)


def simulate(tq: TaskQueue, trace: list[Arrival], scaler: Scaler,
             settings: Settings = Settings()) -> Result:
    """Run `trace` against `tq` scaled by `scaler`."""
    order = [q.key for q in tq.spec.queues]
    unknown = sorted({a.queue for a in trace} - set(order))
    if unknown:
        raise ValueError(f"trace queues {unknown} are not in spec.queues {order}; "
                         "add them to the manifest or rename them in the trace")
    grace = settings.grace
    world = World(trace, queues=order, concurrency=tq.spec.worker.concurrency,
                  startup=settings.startup,
                  grace=tq.spec.worker.terminationGracePeriodSeconds if grace is None else grace,
                  dispatch=settings.dispatch, seed=settings.seed,
                  heartbeat=tq.spec.worker.heartbeatSeconds,
                  flow=FlowSim.of(flow.declared(tq.spec.queues)),
                  horizon=policy.due_horizon(tq.spec.scaling), exit_delay=settings.exit_delay,
                  startup_per_pod=settings.startup_per_pod)
    if settings.history > 0:
        world.counters.service = history(trace, settings.history)
        world.counters.service_sq = history(trace, settings.history, power=2)
        world.reported = dict(world.counters.service)
        world.reported_sq = dict(world.counters.service_sq)
    end = (trace[-1].at if trace else 0.0)
    steps = math.ceil((end + settings.tail) / settings.tick)
    busy_until = 0
    # a fleet held below the load (maxReplicas) may still be serving the backlog then: run on
    # until it has (at most the whole trace's work later, for a fleet that never serves it)
    cap = math.ceil((end + sum(a.service for a in trace) + 2 * settings.tail) / settings.tick)
    last, peak, cost_at_end = 0, 0, None
    scale_log: list[tuple[float, int]] = []
    zeros = _Zeros()
    timeline: list[tuple[float, int, int]] = []
    next_sample = 0.0
    n = -1
    while n < steps:
        n += 1
        t = n * settings.tick
        world.advance(t)
        scaler.tick(world, t)
        live = len(world.live())
        peak = max(peak, live)
        if world.spec_replicas != last:
            last = world.spec_replicas
            scale_log.append((t, last))
        zeros.seen(t, zero=not (world.pods or world.spec_replicas))
        if cost_at_end is None and t >= end:
            cost_at_end = world.worker_seconds
        if t >= next_sample:
            timeline.append((t, live, sum(len(d) for d in world.queues.values())))
            next_sample += settings.sample_every
        if world.has_work():
            busy_until = n
        if n == steps:  # a tail after the last task too
            steps = max(steps, min(cap, busy_until + max(1, math.ceil(settings.tail
                                                                     / settings.tick))))
    c = world.counters
    left = world.unserved(t)
    # a queue without a task in the trace has no waits: left out, not shown as waiting 0 s
    waits = {q: (percentile(w, 0.50), percentile(w, 0.95), percentile(w, 0.99))
             for q, w in ((q, w + left.get(q, [])) for q, w in c.waits.items()) if w}
    served = world.next >= len(trace) and not any(world.queues.values())
    zero_after, restarts = zeros.after(c.last_completion) if served else (None, 0)
    return Result(
        scaler=scaler.name, worker_seconds=world.worker_seconds,
        mean_replicas=(cost_at_end or 0.0) / end if end > 0 else 0.0,
        max_replicas=peak, waits=waits, tasks=len(trace), interrupted=c.interrupted,
        busy_deleted=c.busy_deleted, deleted=c.deleted,
        unserved=world.unfinished(),
        zero_after=zero_after, restarts=restarts, timeline=tuple(timeline),
        scale_log=tuple(scale_log),
    )
