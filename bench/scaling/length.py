"""Length targets on steady traffic: how many pods a TaskQueue without `targetWaitSeconds` holds.

Replays one steady Poisson stream per grid point (concurrency 1/4/8 x need 2.5/5/20 pods x mean
service 0.5/2/10 s, exponential) through the simulator with the default length target (10
tasks per replica) and prints, per run, the mean pods after the first 5 minutes against the
need (arrival rate x service / concurrency), the p95 wait and the scale changes.

    python bench/scaling/length.py [--duration 1200]
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "operator"))

from taskqueue.api.models import TaskQueue
from taskqueue.simulate import trace
from taskqueue.simulate.run import simulate
from taskqueue.simulate.scalers import OperatorScaler

WARM_UP = 300.0


def manifest(concurrency: int) -> TaskQueue:
    return TaskQueue.model_validate({"spec": {
        "redis": {"url": "redis://redis:6379/0"}, "queues": [{"key": "tasks"}],
        "worker": {"concurrency": concurrency}, "scaling": {"maxReplicas": 100}}})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=1200.0)
    args = parser.parse_args(argv)
    print("| c | need | S | pods / need | p95 wait | scale changes |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for c, need, service in itertools.product((1, 4, 8), (2.5, 5.0, 20.0), (0.5, 2.0, 10.0)):
        tq = manifest(c)
        arrivals = trace.generate("steady", trace.Load(rate=need * c / service, service=service,
                                                       duration=args.duration))
        result = simulate(tq, arrivals, OperatorScaler(tq))
        ratio = result.replicas_between(WARM_UP, args.duration) / need
        ratios.append(ratio)
        print(f"| {c} | {need:g} | {service:g} s | {ratio:.2f}x | {result.p95():.2f} s | "
              f"{result.scale_changes} |")
    print(f"\nmean pods / need {sum(ratios) / len(ratios):.2f}x; over 1.2x: "
          f"{sum(r > 1.2 for r in ratios)} of {len(ratios)} (at need 2.5, 3 pods are 1.2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
