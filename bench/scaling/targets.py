"""Cost against the wait target: a looser `targetWaitSeconds` should not cost more.

Replays one built-in trace (spikes by default: bursts of 30 tasks per slot at once, every
~10 min, on pods that start in 5 s) through the simulator with the bench's manifest
(bench/scaling/taskqueue.yaml) at each target in turn, and prints the worker-seconds and p95
wait per target. A cost that rises with the target shows a burst sized again, poll after poll,
as it ages (what `waitpolicy.standing_slots` is for).

    python bench/scaling/targets.py [--trace spikes] [--concurrency 1,4] [--targets 2,5,8,11,15,20]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run as bench  # bench/scaling/run.py: the manifest and the traces' loads

from taskqueue.simulate import trace
from taskqueue.simulate.run import simulate
from taskqueue.simulate.scalers import OperatorScaler

DURATION = 3600.0


def row(name: str, concurrency: int, targets: list[float]) -> str:
    load = trace.Load(rate=bench.RATES[name] * concurrency, service=bench.SERVICE,
                      duration=DURATION, queue="tasks")
    arrivals = trace.generate(name, load)
    cells = []
    for target in targets:
        tq = bench.taskqueue(concurrency, name, [f"scaling.targetWaitSeconds.tasks={target}"])
        r = simulate(tq, arrivals, OperatorScaler(tq))
        cells.append(f"{r.worker_seconds:,.0f} ({r.p95():.2f} s)".replace(",", " "))
    return f"| {name} | {concurrency} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", default="spikes",
                        choices=[t for t in bench.RATES if t != "two-priority"])
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--targets", default="2,5,8,11,15,20")
    args = parser.parse_args()
    targets = [float(t) for t in args.targets.split(",")]
    print("| trace | c | " + " | ".join(f"T={t:g} s: worker-s (p95)" for t in targets) + " |")
    print("|---|---|" + "---|" * len(targets))
    for c in (int(x) for x in args.concurrency.split(",")):
        print(row(args.trace, c, targets))


if __name__ == "__main__":
    main()
