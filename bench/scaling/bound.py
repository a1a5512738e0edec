"""Lower bounds on the worker-seconds any scaler needs for a bench trace (bench/scaling/run.py).

- work: every task's service seconds / concurrency (a pod holds at most `concurrency` tasks); no
  scaler can cost less, whatever its waits.
- wait (smooth traces: steady, diurnal): the fewest worker-seconds that keep the p95 wait of all
  tasks of the trace under T, for an M/M/c queue whose arrival rate (the trace's, in 60 s bins) is
  known in advance, pods that start instantly and cost nothing to add or remove: per bin, c slots
  with P(W > T) = C(c, A) exp(-T (c - A) / S) (Erlang C), the slots of each bin chosen to minimise
  slots + mu x late tasks (a Lagrange multiplier, searched), keeping the late share <= 5 %. A real
  scaler (start-up, estimation, integer pods at concurrency > 1) can only cost more.
- wait, queues in priority order (`priority_bound`, families.py's queues): the same per bin,
  each queue's late share <= 5 % of its own tasks, at its own target.

    python bench/scaling/bound.py [--trace diurnal] [--concurrency 1] [--targets 2,5,7.5]
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run as bench  # noqa: E402  (puts this checkout's operator/ first)

from taskqueue.scaling import waitmodel  # noqa: E402
from taskqueue.simulate import trace  # noqa: E402

BIN = 60.0
SMOOTH = ("steady", "diurnal")


@dataclass(frozen=True)
class Minutes:
    """A trace binned for the oracles: each queue's arrival rate in each bin (tasks a second),
    its mean service time and its number of tasks, queues in the manifest's priority order."""
    rates: list[list[float]]
    services: list[float]
    counts: list[int]


def minutes(arrivals: Sequence[trace.Arrival], keys: Sequence[str], *,
            duration: float) -> Minutes:
    """Bins `arrivals` by queue (one key: every arrival, whatever its queue name)."""
    index = {k: i for i, k in enumerate(keys)}
    rates = [[0.0] * math.ceil(duration / BIN) for _ in keys]
    work = [0.0] * len(keys)
    counts = [0] * len(keys)
    for a in arrivals:
        k = 0 if len(keys) == 1 else index[a.queue]
        rates[k][min(len(rates[k]) - 1, int(a.at // BIN))] += 1 / BIN
        work[k] += a.service
        counts[k] += 1
    return Minutes(rates, [w / n if n else 0.0 for w, n in zip(work, counts, strict=True)],
                   counts)


def late_share(slots: int, load: float, target: float, service: float) -> float:
    if slots <= load:
        return 1.0
    return waitmodel.erlang_c(slots, load) * math.exp(-target * (slots - load) / service)


def wait_bound(rates: list[float], *, service: float, target: float, concurrency: int) -> float:
    """Fewest worker-seconds keeping the late share <= 5 % (see the module docstring)."""
    total = sum(rates)
    best = math.inf
    for mu in (0.25 * 1.3 ** k for k in range(60)):
        cost, late = 0.0, 0.0
        for lam in rates:
            if lam <= 0:
                continue
            load = lam * service
            options = range(math.floor(load) + 1, math.floor(load) + 30)
            slots = min(options, key=lambda c: math.ceil(c / concurrency)
                        + mu * lam * late_share(c, load, target, service))
            cost += math.ceil(slots / concurrency) * BIN
            late += lam * late_share(slots, load, target, service)
        if late <= (1 - waitmodel.QUANTILE) * total:
            best = min(best, cost)
    return best


def priority_bound(rates: list[list[float]], *, services: list[float],
                   targets: list[float | None], concurrency: int) -> float:
    """`wait_bound` for queues served in priority order, each keeping the p95 wait of its own
    tasks under its target (None: no target). `rates[k][i]` is queue k's arrival rate in bin i,
    `services[k]` its mean service time. A task of queue k waits as in an M/M/c queue with
    non-preemptive priority (Cobham: `waitmodel.wait_tail`, on the mix of the service times the
    bin's arrivals bring, as the policy's model); one multiplier prices a late task by the share
    of its queue's tasks it is, so every queue keeps its late share <= 5 %."""
    totals = [sum(r) * BIN for r in rates]
    per_bin = []  # per bin: [(pods, [late tasks of queue k / its tasks]) for each slot count]
    for i in range(len(rates[0])):
        lams = [r[i] for r in rates]
        load = sum(lam * s for lam, s in zip(lams, services, strict=True))
        if load <= 0:
            continue
        mix = load / sum(lams)
        options = []
        for c in range(math.floor(load) + 1, math.floor(load) + 40):
            waiting = waitmodel.erlang_c(c, load)
            before, late = 0.0, []
            for lam, s, target, total in zip(lams, services, targets, totals, strict=True):
                through = before + lam * s
                share = 0.0 if target is None or lam <= 0 else waitmodel.wait_tail(
                    slots=c, service=mix, load_before=before, load_through=through,
                    load_total=load, wait=target, waiting=waiting)
                late.append(lam * BIN * share / total if total else 0.0)
                before = through
            options.append((math.ceil(c / concurrency), late))
        per_bin.append(options)
    best = math.inf
    for mu in (0.25 * 1.3 ** k for k in range(70)):
        cost, late = 0.0, [0.0] * len(rates)
        for options in per_bin:
            pods, shares = min(options, key=lambda o: o[0] + mu * sum(o[1]))
            cost += pods * BIN
            late = [a + b for a, b in zip(late, shares, strict=True)]
        if all(x <= 1 - waitmodel.QUANTILE for x in late):
            best = min(best, cost)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="diurnal", choices=sorted(trace.GENERATORS))
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--duration", type=float, default=3600.0)
    parser.add_argument("--targets", default="2,5,7.5")
    args = parser.parse_args(argv)
    arrivals = trace.generate(args.trace, trace.Load(
        rate=bench.RATES[args.trace] * args.concurrency, service=bench.SERVICE,
        duration=args.duration))
    work = sum(a.service for a in arrivals) / args.concurrency
    print(f"{args.trace}, concurrency {args.concurrency}: {len(arrivals)} tasks")
    print(f"work bound: {work:.0f} worker-seconds")
    if args.trace not in SMOOTH:
        return 0
    binned = minutes(arrivals, ["tasks"], duration=args.duration)
    for target in (float(t) for t in args.targets.split(",")):
        bound = wait_bound(binned.rates[0], service=binned.services[0], target=target,
                           concurrency=args.concurrency)
        print(f"p95 wait <= {target:g} s bound: {bound:.0f} worker-seconds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
