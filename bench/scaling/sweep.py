"""Generality sweep: steady Poisson traffic over a grid of task shapes, fleets and targets.

The traces of `run.py` are a handful; this replays one steady stream per grid point through the
simulator (the real `policy.decide` and scale-in) from a cold start, and reports which runs miss
their own `targetWaitSeconds` and what they cost against the need (lambda x S / concurrency).

    python bench/scaling/sweep.py [--duration 1800] [--jobs 2] [--json sweep.json]

Grid: concurrency 1/4/16 x mean service 0.2/2/20 s x exponential / constant / log-normal
(cv2 4) x need 0.5/3/15 pods x target 1/5/30 s x pod start-up 1/20 s, without the points of
more than 150 000 tasks (414 runs, ~4 min on 2 cores). A run counts as late when its p95 wait
is over its target; its cost is mean replicas / need. Every run is also checked for busy pods
deleted, tasks interrupted or not completed, and the time back to zero.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import statistics
import sys
from multiprocessing import Pool
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as bench  # bench/scaling/run.py: the manifest
from nonpoisson import lognormal

from taskqueue.simulate.run import Settings, simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.simulate.trace import Arrival

CONCURRENCY = (1, 4, 16)
SERVICE = (0.2, 2.0, 20.0)
SHAPES = ("exp", "constant", "lognormal")
NEED = (0.5, 3.0, 15.0)
TARGETS = (1.0, 5.0, 30.0)
STARTUP = (1.0, 20.0)
MAX_TASKS = 150_000

Point = tuple[int, float, str, float, float, float]


def draw(rng: random.Random, shape: str, mean: float) -> float:
    if shape == "exp":
        return rng.expovariate(1 / mean)
    if shape == "constant":
        return mean
    return lognormal(rng, mean, 2.0)  # cv2 4


def arrivals(point: Point, duration: float) -> list[Arrival]:
    concurrency, service, shape, need, _, _ = point
    rng, rate = random.Random(11), need * concurrency / service
    out, t = [], rng.expovariate(rate)
    while t < duration:
        out.append(Arrival(t, "tasks", draw(rng, shape, service)))
        t += rng.expovariate(rate)
    return out


def one(args: tuple[Point, float]) -> dict[str, Any]:
    point, duration = args
    concurrency, service, shape, need, target, startup = point
    tq = bench.taskqueue(concurrency, "steady", [
        f"scaling.targetWaitSeconds.tasks={target}", f"scaling.podStartupSeconds={startup}",
        "scaling.maxReplicas=200"])
    r = simulate(tq, arrivals(point, duration), OperatorScaler(tq), Settings(startup=startup))
    return {"concurrency": concurrency, "service": service, "shape": shape, "need": need,
            "target": target, "startup": startup, "p95": round(r.p95(), 3),
            "cost": round(r.mean_replicas / need, 3), "late": r.p95() > target,
            "unsafe": r.busy_deleted + r.interrupted + r.unserved,
            "zero_after": r.zero_after,
            "zero_late": not bench.back_to_zero(r, tq.spec.scaling.idleCooldownSeconds,
                                                tq.spec.scaling.pollIntervalSeconds)}


def grid(duration: float) -> list[Point]:
    points = itertools.product(CONCURRENCY, SERVICE, SHAPES, NEED, TARGETS, STARTUP)
    return [p for p in points if p[3] * p[0] / p[1] * duration <= MAX_TASKS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=1800.0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    points = grid(args.duration)
    with Pool(args.jobs) as pool:
        rows = pool.map(one, [(p, args.duration) for p in points])
    late = [r for r in rows if r["late"]]
    for r in late:
        print("late: c={concurrency} S={service} {shape} need={need} target={target} "
              "startup={startup}: p95 {p95} s, cost {cost}x".format(**r))
    print(f"{len(rows)} runs, {len(late)} over their target, "
          f"{sum(r['unsafe'] > 0 for r in rows)} with a busy pod deleted, a task interrupted "
          f"or not completed, {sum(r['zero_late'] for r in rows)} not back to zero within "
          f"idleCooldownSeconds + one poll; mean replicas / need: mean "
          f"{statistics.mean(r['cost'] for r in rows):.3f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
