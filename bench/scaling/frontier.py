"""What a simple fleet could reach on the runs the policy misses (issue 34).

The targets of `families.py` ask, on every trace that is not smooth, for worker-seconds <= 1.5x
the tuned KEDA model's AND each queue's p95 wait within its target or <= 0.65x keda-tuned's
(the box; on a run of several queues, each queue against its own target and keda-tuned's p95
on that queue). Some runs miss it; this says whether any fleet of a simple kind gets into the box on
them, so a miss is known to be the policy's or the target's. Each run's trace and manifest
(`families.setup`, the same draws as `families.py --six` / `--sweep 12`) are replayed through the
same simulator (`taskqueue.simulate`, its default cluster: pods up in 5 s, writes 0.1 s after the
decision, a drained pod billed 1.8 s to its exit) with `Fleet`, a scaler with two knobs:

- `pods`: on a decision that sees tasks queued, it asks for one slot per task queued or in
  flight, at most `pods` pods (never fewer than it has); swept 2..40 (`PODS`);
- `hold`: on a decision that sees nothing queued, the pods idle for `hold` seconds (and those
  not up yet) are removed, the idle ones first (no busy pod is deleted); swept 0, 5, 10 and
  30 s (the bench's idleCooldownSeconds): on steady-rate traffic a few seconds of hold keep a
  small fleet from paying a start-up per gap (heavytail-pareto1.5 c=1, 4 pods: 6.38 s with
  0 s, 3.51 s at 1.44x keda-tuned with 5 s, 1.71x with 30 s; its target is 5 s);

in four modes, and a fifth without a decision:

| mode     | decides                   | sees                                  | writes land |
|----------|---------------------------|---------------------------------------|-------------|
| reactive | every pollIntervalSeconds | what is queued                        | 0.1 s later |
| warm     | every pollIntervalSeconds | what is queued                        | 0.1 s later |
| lands    | every tick (0.1 s)        | what is queued                        | at once     |
| ahead    | every tick                | queued + what arrives within start-up | at once     |
| fixed    | once, at t=0              | nothing: `pods` pods (hold ignored)   | at once     |

`reactive` is a fleet a poller could run; `warm` the same fleet keeping the manifest's
idleCooldownSeconds: one pod stays until that long after the last task queued or in flight, as
the operator and keda-tuned keep one (a reactive fleet with a short hold goes to zero the
moment the queue is empty, which a manifest with a cooldown does not ask for); `lands` the
optimistic bound the issue asks for (pods started the instant a batch lands: no detection
delay); `ahead` a perfect forecast (pods up when
the batch lands), the bound of what starting ahead of recurring batches can give; `fixed` a
constant fleet of `pods` pods up from the start and released once the trace has drained (no
pod is busy then), the stationary bound for steady-rate traffic (heavytail, queues), where a
fleet sized to the rate is what meeting a wait target costs; swept 1..8. For each run
and mode it prints the cost / p95 frontier (the points no other point beats on both; on several
queues, p95 is the worst queue's as a multiple of its allowance) and whether a point is in the
box; where no point is, the box is out of reach for fleets of this kind on that run. A second
verdict gives the cheapest point of any mode that meets every queue's own target (the 0.65x
clause left out): when that costs over 1.5x, the box is entered, if at all, only by missing the
user's target on purpose, and the miss is the target's rather than the policy's. A third gives
the same two for the `warm` fleets alone: what a poller keeping the manifest's cooldown reaches.

    python bench/scaling/frontier.py [--only NAME,...] [--jobs 2] [--json frontier.json]

Deterministic (seeded traces, no clock).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import families

from taskqueue.api.models import TaskQueue
from taskqueue.simulate.run import Result, simulate
from taskqueue.simulate.scalers import KEDA_TUNED, KedaScaler, OperatorScaler
from taskqueue.simulate.trace import Arrival
from taskqueue.simulate.world import API_DELAY_SECONDS, World

TICK = 0.1
"""The simulator's tick (`simulate.run.Settings.tick`): the clairvoyant modes decide on each."""
PODS = (2, 4, 8, 13, 20, 40)
HOLDS = (0.0, 5.0, 10.0, 30.0)
FIXED_PODS = tuple(range(1, 9))
MODES = ("reactive", "lands", "ahead", "fixed", "warm")


def grid(mode: str) -> list[tuple[int, float]]:
    """The (pods, hold) points swept in `mode`."""
    if mode == "fixed":
        return [(k, 0.0) for k in FIXED_PODS]
    return [(k, h) for k in PODS for h in HOLDS]

RUNS: dict[str, tuple[set[str], int, int, int]] = {
    # name: (families.make_jobs's `only`, concurrency, sweep draws: 0 for the fixed cases, seed)
    "spikes c=1": ({"spikes"}, 1, 0, 3),
    "batches-100/600s c=4": ({"batches-100/600s"}, 4, 0, 3),
    "batches-0 c=1": ({"batches-0"}, 1, 12, 3),
    "batches-7 c=1": ({"batches-7"}, 1, 12, 3),
    "batches-10 c=1": ({"batches-10"}, 1, 12, 3),
    "heavytail-7 c=1": ({"heavytail-7"}, 1, 12, 3),
    # cost misses whose p95 is far inside the target: the fixed fleets' runs
    "heavytail-pareto1.5 c=1": ({"heavytail-pareto1.5"}, 1, 0, 3),
    "heavytail-2 c=1": ({"heavytail-2"}, 1, 12, 3),
    "heavytail-10 c=1": ({"heavytail-10"}, 1, 12, 3),
    "heavytail-11 c=1": ({"heavytail-11"}, 1, 12, 3),
    "queues-5 c=1": ({"queues-5"}, 1, 12, 3),
    "queues-8 c=1": ({"queues-8"}, 1, 12, 3),  # the sweep draw (n 8, S 0.5): the fixed case meets
    # the misses of the draws the tables do not use (`families.py --sweep 24 --seed 11`)
    "batches-3 c=1 (seed 11)": ({"batches-3"}, 1, 24, 11),
    "batches-4 c=4 (seed 11)": ({"batches-4"}, 4, 24, 11),
    "batches-6 c=1 (seed 11)": ({"batches-6"}, 1, 24, 11),
    "batches-8 c=4 (seed 11)": ({"batches-8"}, 4, 24, 11),
    "onoff-1 c=1 (seed 11)": ({"onoff-1"}, 1, 24, 11),
    "onoff-2 c=1 (seed 11)": ({"onoff-2"}, 1, 24, 11),
    "onoff-15 c=1 (seed 11)": ({"onoff-15"}, 1, 24, 11),
    "heavytail-0 c=1 (seed 11)": ({"heavytail-0"}, 1, 24, 11),
    # seed 29's misses whose oracle at the target is under 1.5x keda-tuned (`--seed 29`)
    "batches-5 c=4 (seed 29)": ({"batches-5"}, 4, 24, 29),
    "batches-18 c=1 (seed 29)": ({"batches-18"}, 1, 24, 29),
    "onoff-6 c=1 (seed 29)": ({"onoff-6"}, 1, 24, 29),
    "heavytail-20 c=1 (seed 29)": ({"heavytail-20"}, 1, 24, 29),
    "queues-2 c=1 (seed 29)": ({"queues-2"}, 1, 24, 29),
    "queues-8 c=1 (seed 29)": ({"queues-8"}, 1, 24, 29),
    # seed 41's cost misses whose oracle at the target is under 1.5x keda-tuned (`--seed 41`)
    "heavytail-8 c=1 (seed 41)": ({"heavytail-8"}, 1, 24, 41),
    "queues-4 c=1 (seed 41)": ({"queues-4"}, 1, 24, 41),
    "queues-8 c=1 (seed 41)": ({"queues-8"}, 1, 24, 41),
    "queues-12 c=1 (seed 41)": ({"queues-12"}, 1, 24, 41),
    "ramp-10 c=1 (seed 41)": ({"ramp-10"}, 1, 24, 41),  # smooth: its target is 1.15x the oracle
}
"""The runs that miss the box on main (docs/benchmarks.md): burst and batch runs, and
steady-rate runs that miss on cost with their p95 far inside the target; and one smooth run
that misses its own check (1.15x the oracle), to see what fleets meeting its target cost."""


class Fleet:
    """A scaler of two knobs (module docstring): up to `pods` pods while tasks are queued, idle
    pods removed after `hold` seconds with nothing queued; in mode `warm`, one of them kept
    until idleCooldownSeconds after the last task queued or in flight; in mode `fixed`, `pods`
    pods from the start until the trace has drained."""

    def __init__(self, tq: TaskQueue, *, pods: int, hold: float, mode: str) -> None:
        self.name = f"{mode} pods {pods} hold {hold:g}"
        self.concurrency = tq.spec.worker.concurrency
        self.pods, self.hold = min(pods, tq.spec.scaling.maxReplicas), hold
        self.fixed, self.started = mode == "fixed", False
        reactive = mode in ("reactive", "warm")
        self.cooldown = tq.spec.scaling.idleCooldownSeconds if mode == "warm" else 0.0
        self.last_active = -math.inf
        self.every = tq.spec.scaling.pollIntervalSeconds if reactive else TICK
        self.delay = API_DELAY_SECONDS if reactive else 0.0
        self.lead = tq.spec.scaling.podStartupSeconds if mode == "ahead" else 0.0
        self.next_poll = 0.0
        self.pending: list[tuple[float, int]] = []

    def tick(self, world: World, t: float) -> None:
        if self.fixed:
            self._fixed(world, t)
            return
        for at, replicas in [p for p in self.pending if p[0] <= t + 1e-9]:
            self.pending.remove((at, replicas))
            world.scale(max(replicas, world.spec_replicas), t)
        if t + 1e-9 >= self.next_poll:
            self.next_poll += self.every
            self._decide(world, t)

    def _fixed(self, world: World, t: float) -> None:
        """`pods` pods on the first tick; none once nothing is to arrive, queued or in flight
        (so no pod is busy when they go)."""
        if not self.started:
            self.started = True
            world.scale(self.pods, t)
        elif world.spec_replicas and not world.has_work():
            world.scale(0, t)

    def _decide(self, world: World, t: float) -> None:
        queued = sum(len(d) for d in world.queues.values())
        i = world.next
        while i < len(world.trace) and world.trace[i].at <= t + self.lead:
            queued, i = queued + 1, i + 1
        live = world.live()
        current = world.spec_replicas
        held = sum(p.in_flight() for p in live)
        if queued or held:
            self.last_active = t
        if queued:
            want = max(current, min(self.pods, math.ceil((held + queued) / self.concurrency)))
            if want > current and not self.pending:
                if self.delay > 0:
                    self.pending.append((t + self.delay, want))
                else:
                    world.scale(want, t)
            return
        if self.pending:
            return
        # nothing queued: the pods idle for `hold` (and those not up yet) go, idle ones first
        costs = {p.name: "1" if p.ready_at <= t and (
            p.in_flight() or t - max(p.free_at, default=p.ready_at) < self.hold) else "0"
            for p in live}
        if t - self.last_active < self.cooldown and live and "1" not in costs.values():
            # within the cooldown: one pod stays (the one up longest)
            costs[min(live, key=lambda p: p.ready_at).name] = "1"
        keep = sum(1 for c in costs.values() if c == "1")
        if keep < current:
            world.set_costs(costs)
            world.scale(keep, t)


@dataclass(frozen=True)
class Point:
    mode: str
    pods: int
    hold: float
    cost: float
    """Worker-seconds / keda-tuned's."""
    p95: float
    """The worst queue's p95 (seconds)."""
    worker_seconds: float
    busy_deleted: int
    unserved: int
    waits: dict[str, float]
    """Each queue's p95 (seconds)."""

    def inside(self, box: Box) -> bool:
        return self.cost <= families.KEDA_COST and box.holds(self.waits)


@dataclass(frozen=True)
class Box:
    """A run's box: worker-seconds <= 1.5x keda-tuned's and each queue's p95 within its
    allowance, the larger of its target and 0.65x keda-tuned's p95 on that queue."""

    keda_seconds: float
    keda_p95: dict[str, float]
    """keda-tuned's p95 per queue."""
    targets: dict[str, float]

    def allowed(self, queue: str) -> float:
        """The p95 the box allows on `queue`: its target or 0.65x keda-tuned's there."""
        return families.allowed_wait(self.targets.get(queue), self.keda_p95.get(queue, 0.0))

    def holds(self, waits: dict[str, float]) -> bool:
        """Every queue's p95 within its allowance."""
        return all(w <= self.allowed(q) for q, w in waits.items())

    def worst(self, waits: dict[str, float]) -> tuple[str, float]:
        """The queue whose p95 is the largest multiple of its allowance, and that multiple."""
        return max(((q, _ratio(w, self.allowed(q))) for q, w in waits.items()),
                   key=lambda qr: qr[1], default=("", 0.0))

    def over(self, waits: dict[str, float]) -> float:
        """The worst queue's p95 as a multiple of its allowance (<= 1: every queue inside)."""
        return self.worst(waits)[1]

    def met(self, waits: dict[str, float]) -> bool:
        """Every queue with a target has its p95 within it (the 0.65x clause left out)."""
        return all(w <= self.targets[q] for q, w in waits.items() if q in self.targets)

    @property
    def allowances(self) -> dict[str, float]:
        return {q: self.allowed(q) for q in sorted({*self.targets, *self.keda_p95})}


def _ratio(value: float, limit: float) -> float:
    if limit > 0:
        return value / limit
    return math.inf if value > 0 else 0.0


def _job(name: str) -> families.Job:
    only, concurrency, sweep, seed = RUNS[name]
    jobs = families.make_jobs(only=only, concurrencies=[1, 4] if sweep else [concurrency],
                              sweep=sweep, seed=seed, six_too=not sweep)
    job = next(j for j in jobs if j[3] == concurrency)
    return job


def _simulate(task: tuple[str, str, int, float, float]) -> Point:
    name, mode, pods, hold, keda_seconds = task
    tq, arrivals, _ = families.setup(_job(name))
    r = simulate(tq, arrivals, Fleet(tq, pods=pods, hold=hold, mode=mode))
    return _point(mode=mode, pods=pods, hold=hold, r=r, keda_seconds=keda_seconds)


def _point(*, mode: str, pods: int, hold: float, r: Result, keda_seconds: float) -> Point:
    return Point(mode, pods, hold, r.worker_seconds / keda_seconds, r.p95(),
                 r.worker_seconds, r.busy_deleted, r.unserved,
                 {q: w[1] for q, w in r.waits.items()})


def box_of(tq: TaskQueue, arrivals: list[Arrival]) -> Box:
    """A run's box, from keda-tuned's run of its trace and its targets."""
    keda = simulate(tq, arrivals, KedaScaler(tq, KEDA_TUNED))
    targets = dict(tq.spec.scaling.targetWaitSeconds or {})
    return Box(keda.worker_seconds, {q: w[1] for q, w in keda.waits.items()}, targets)


def _reference(name: str) -> tuple[Box, Point]:
    """The run's box and what the operator's policy gets on it."""
    tq, arrivals, _ = families.setup(_job(name))
    box = box_of(tq, arrivals)
    ours = simulate(tq, arrivals, OperatorScaler(tq))
    return box, _point(mode="operator", pods=ours.max_replicas,
                       hold=tq.spec.scaling.idleCooldownSeconds, r=ours,
                       keda_seconds=box.keda_seconds)


def frontier(points: list[Point], box: Box) -> list[Point]:
    """The points no other point beats on both cost and p95 (the worst queue's, against its
    allowance), cheapest first."""
    out: list[Point] = []
    for p in sorted(points, key=lambda p: (p.cost, box.over(p.waits))):
        if not out or box.over(p.waits) < box.over(out[-1].waits):
            out.append(p)
    return out


def _waits(p: Point, box: Box) -> str:
    """A point's p95: seconds on one queue; the worst queue against its allowance on several."""
    if len(p.waits) <= 1:
        return f"{p.p95:.2f} s"
    q, ratio = box.worst(p.waits)
    return f"{q} {p.waits[q]:.2f} s = {ratio:.2f}x its allowance"


def verdict(box: Box, points: list[Point]) -> str:
    inside = {m: [p for p in points if p.mode == m and p.inside(box)] for m in MODES}
    for mode in ("reactive", "warm"):
        if inside[mode]:
            best = min(inside[mode], key=lambda p: p.cost)
            return (f"reachable: {mode} pods {best.pods} hold {best.hold:g} "
                    f"({best.cost:.2f}x, {_waits(best, box)})")
    if inside["fixed"]:
        best = min(inside["fixed"], key=lambda p: p.cost)
        return f"reachable: fixed pods {best.pods} ({best.cost:.2f}x, {_waits(best, box)})"
    for mode in ("lands", "ahead"):
        if inside[mode]:
            best = min(inside[mode], key=lambda p: p.cost)
            return (f"only {mode}: pods {best.pods} hold {best.hold:g} "
                    f"({best.cost:.2f}x, {_waits(best, box)})")
    cheap = [p for p in points if p.cost <= families.KEDA_COST]
    fastest = min(cheap, key=lambda p: box.over(p.waits)) if cheap else None
    figure = (f"best p95 at <= 1.5x: {_waits(fastest, box)} ({fastest.mode} pods "
              f"{fastest.pods} hold {fastest.hold:g})" if fastest else "no point at <= 1.5x")
    return f"out of reach for these fleets: {figure} against {_per_queue(box.allowances)}"


def _settings(p: Point) -> str:
    """A point's pods and hold (a fixed fleet has no hold)."""
    return f"k{p.pods}" if p.mode == "fixed" else f"k{p.pods} h{p.hold:g}"


def _knobs(p: Point) -> str:
    return f"{p.mode} {_settings(p)}"


def target_met(box: Box, points: list[Point]) -> tuple[str, Point | None]:
    """The cheapest point meeting every queue's own target, against the box's 1.5x: above
    it, the box is reached (if at all) only by missing the user's target by design."""
    met = [p for p in points if box.met(p.waits)]
    if not met:
        return "target met by no point swept", None
    best = min(met, key=lambda p: (p.cost, p.p95))
    tail = ("within 1.5x" if best.cost <= families.KEDA_COST
            else "above 1.5x: the box only by missing the target")
    return f"target met from {best.cost:.2f}x ({_knobs(best)}): {tail}", best


def warm_verdict(box: Box, points: list[Point]) -> str:
    """The cheapest `warm` point in the box and the cheapest meeting every queue's target:
    what a poller that keeps the manifest's cooldown reaches."""
    warm = [p for p in points if p.mode == "warm"]
    inside = [p for p in warm if p.inside(box)]
    met = [p for p in warm if box.met(p.waits)]
    if inside:
        best = min(inside, key=lambda p: p.cost)
        reach = f"in the box from {best.cost:.2f}x ({_settings(best)}, {_waits(best, box)})"
    else:
        reach = "not in the box"
    if not met:
        return f"{reach}; the target met by none"
    cheapest = min(met, key=lambda p: (p.cost, p.p95))
    return f"{reach}; the target met from {cheapest.cost:.2f}x ({_settings(cheapest)})"


def _per_queue(seconds: dict[str, float]) -> str:
    """Seconds per queue: the figure alone for one queue, each queue's for several."""
    if len(seconds) == 1:
        return f"{next(iter(seconds.values())):.2f} s"
    return ", ".join(f"{q} {v:.2f}" for q, v in seconds.items()) + " s"


def _fmt(p: Point, box: Box) -> str:
    mark = " **in**" if p.inside(box) else ""
    unsafe = f", {p.busy_deleted} busy deleted" if p.busy_deleted else ""
    unsafe += f", {p.unserved} unserved" if p.unserved else ""
    mark += " (target met)" if box.met(p.waits) else ""
    wait = f"{p.p95:.1f}s" if len(p.waits) <= 1 else f"{box.over(p.waits):.2f}x box"
    return f"{p.cost:.2f}x/{wait} ({_settings(p)}){mark}{unsafe}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma list of RUNS names")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    names = [n for n in RUNS if not args.only or n in args.only.split(",")]
    with Pool(args.jobs) as pool:
        refs = dict(zip(names, pool.map(_reference, names, chunksize=1), strict=True))
        tasks = [(n, m, k, h, refs[n][0].keda_seconds)
                 for n in names for m in MODES for k, h in grid(m)]
        points = pool.map(_simulate, tasks, chunksize=1)
    by_run: dict[str, list[Point]] = {n: [] for n in names}
    for (n, *_), p in zip(tasks, points, strict=True):
        by_run[n].append(p)
    print("| run | box: cost <= 1.5x, p95 <= | keda-tuned | operator (this checkout) | "
          + " | ".join(f"{m} frontier: cost x keda-tuned / p95 (pods, hold s)" for m in MODES)
          + " | verdict | meeting the target | keeping the cooldown (warm) |")
    print("|---|---|---|---|" + "---|" * len(MODES) + "---|---|---|")
    out: list[dict[str, Any]] = []
    for n in names:
        box, ours = refs[n]
        cells = ["; ".join(_fmt(p, box) for p in frontier(
            [p for p in by_run[n] if p.mode == m], box)) for m in MODES]
        why = verdict(box, by_run[n])
        met, cheapest = target_met(box, by_run[n])
        warm = warm_verdict(box, by_run[n])
        print(f"| {n} | {_per_queue(box.allowances)} | {box.keda_seconds:,.0f} worker-s, "
              f"{_per_queue(box.keda_p95)}"
              f" | {ours.cost:.2f}x/{_waits(ours, box)} | " + " | ".join(cells)
              + f" | {why} | {met} | {warm} |")
        out.append({"run": n, "box_p95": box.allowances, "keda_tuned": {
            "worker_seconds": box.keda_seconds, "p95": box.keda_p95}, "targets": box.targets,
            "operator": {"cost": ours.cost, "p95": ours.waits},
            "verdict": why, "target_met": {"verdict": met, "cheapest": (
                None if cheapest is None else cheapest.__dict__)},
            "warm": warm,
            "points": [p.__dict__ for p in by_run[n]]})
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
