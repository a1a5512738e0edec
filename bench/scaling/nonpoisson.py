"""Non-Poisson traffic: batches that recur (met since batch arrivals are measured) and a rate
that jumps faster than a pod starts (a known limit).

The wait model (`taskqueue.scaling.waitmodel`) takes arrivals as Poisson unless the measured
dispersion says they come in batches (`Arrivals.cv2`), and a burst as rare enough to be started
by pods added for it. Three seeded traces test that, an hour each, at
concurrency 1 and 4, with the bench's manifest (bench/scaling/taskqueue.yaml: p95 wait target
2 s, pods that start in 5 s):

| trace  | traffic                                                                         |
|--------|---------------------------------------------------------------------------------|
| mmpp   | Poisson at 2 or 12 tasks/s per slot / 4, switching after exponential 60 s phases |
| micro  | bursts of 5-15 tasks (0.5 s each) at once, every ~5 s (exponential gaps)        |
| heavy  | Poisson at 1 task/s per slot of log-normal tasks, mean 1 s, cv 3                |

    python bench/scaling/nonpoisson.py [--concurrency 1,4]

It prints the operator's and keda-tuned's worker-seconds and p95 wait per trace.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as bench  # bench/scaling/run.py: the manifest

from taskqueue.simulate.run import simulate
from taskqueue.simulate.scalers import KEDA_TUNED, KedaScaler, OperatorScaler
from taskqueue.simulate.trace import Arrival

DURATION = 3600.0


def lognormal(rng: random.Random, mean: float, cv: float) -> float:
    s2 = math.log(1 + cv * cv)
    return rng.lognormvariate(math.log(mean) - s2 / 2, math.sqrt(s2))


def mmpp(per_slot: int, rng: random.Random) -> list[Arrival]:
    out, t, high, switch = [], 0.0, False, rng.expovariate(1 / 60)
    while t < DURATION:
        t += rng.expovariate((12.0 if high else 2.0) * per_slot / 4)
        if t > switch:
            high, switch = not high, t + rng.expovariate(1 / 60)
        out.append(Arrival(t, "tasks", rng.expovariate(1.0)))
    return out


def micro(per_slot: int, rng: random.Random) -> list[Arrival]:
    out, t = [], 0.0
    while t < DURATION:
        t += rng.expovariate(1 / 5)
        out += [Arrival(t, "tasks", rng.expovariate(2.0))
                for _ in range(rng.randint(5, 15) * per_slot)]
    return out


def heavy(per_slot: int, rng: random.Random) -> list[Arrival]:
    out, t = [], 0.0
    while t < DURATION:
        t += rng.expovariate(1.0 * per_slot)
        out.append(Arrival(t, "tasks", lognormal(rng, 1.0, 3.0)))
    return out


TRACES = {"mmpp": mmpp, "micro": micro, "heavy": heavy}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", default="1,4")
    args = parser.parse_args(argv)
    print("| trace | c | operator worker-s | p95 (target 2 s) | keda-tuned worker-s | p95 |")
    print("|---|---|---|---|---|---|")
    for name, make in TRACES.items():
        for c in (int(v) for v in args.concurrency.split(",")):
            tq = bench.taskqueue(c, "steady", [])
            arrivals = sorted(make(c, random.Random(7)), key=lambda a: a.at)
            ours = simulate(tq, arrivals, OperatorScaler(tq))
            tuned = simulate(tq, arrivals, KedaScaler(tq, KEDA_TUNED))
            print(f"| {name} | {c} | {ours.worker_seconds:,.0f} | {ours.p95():.2f} s | "
                  f"{tuned.worker_seconds:,.0f} | {tuned.p95():.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
