"""Whether a batch run's box can be reached by a policy that has not yet seen a batch (issue 34).

A policy sizes from what it has measured. The first batch of a trace lands on the fleet the
traffic before it keeps (a trickle's pod), and the second before any period can be measured
(one batch gives no gap). Pods asked for on seeing a batch run no sooner than the next poll +
the API write + the pod start-up. For each batch run of `frontier.RUNS`, this counts the tasks
of each of the first two batches that no policy starts within the box's p95 allowance
(`frontier.Box.allowed`: the larger of the target and 0.65x keda-tuned's p95) with 1..8 pods
standing when it lands: those the standing pods cannot start by then, maxReplicas pods joining
when the reinforcements are up. The p95 is over every task of the trace, so:

- when the first batch alone on one pod leaves more than 5 % of them late, the box is out of
  reach for any policy that holds pods only for traffic it has measured;
- the cheapest standing pods for the first two batches within that 5 % (idle pods beyond the
  trickle's one, held from the start or the batch before) are set against what 1.5x
  keda-tuned leaves if everything else cost what keda-tuned pays (0.5x its worker-seconds): a
  lower bound, before the later batches and the trickle add any late task.

    python bench/scaling/firstbatch.py [--only NAME,...] [--json firstbatch.json]

Deterministic (seeded traces, no clock); seconds.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import families
import frontier

from taskqueue.simulate.run import POD_STARTUP_SECONDS
from taskqueue.simulate.world import API_DELAY_SECONDS

STANDING = range(1, 9)
"""The standing pods tried when a batch lands (a slot each per concurrency)."""
BATCH_AT_ONCE = 5
"""Tasks with the same arrival time, at least this many, are a batch (the generator pushes a
batch at one instant; the trickle's Poisson arrivals never coincide)."""


def started_by(services: list[float], *, pods: int, slots_each: int, deadline: float,
               more_at: float, more: int) -> int:
    """Tasks (in order, each of the given service time) started by `deadline` on `pods` pods of
    `slots_each` slots free at 0, with `more` pods more free from `more_at` on."""
    free = [0.0] * (pods * slots_each)
    heapq.heapify(free)
    added, started = False, 0
    for service in services:
        if not added and more and (not free or free[0] > more_at):
            for _ in range(more * slots_each):
                heapq.heappush(free, more_at)
            added = True
        start = heapq.heappop(free)
        if start > deadline:
            break
        started += 1
        heapq.heappush(free, start + service)
    return started


def _late(batch: list[float], *, standing: int, landed: float, allowed: float,
          concurrency: int, poll: float, more: int) -> int:
    """The tasks of a batch landing at `landed` on `standing` pods that no policy starts within
    `allowed` seconds: pods asked for on the poll that sees it run a write and a start-up later."""
    seen = math.ceil(landed / poll - 1e-9) * poll  # the simulator polls from t=0
    running = seen - landed + API_DELAY_SECONDS + POD_STARTUP_SECONDS
    return len(batch) - started_by(batch, pods=standing, slots_each=concurrency,
                                   deadline=allowed, more_at=running, more=more)


def first_batches(name: str) -> dict[str, Any]:
    """The first two batches' bound on run `name` (module docstring)."""
    tq, arrivals, _ = families.setup(frontier._job(name))
    box = frontier.box_of(tq, arrivals)
    scaling = tq.spec.scaling
    at = Counter(a.at for a in arrivals)
    landings = sorted(t for t, n in at.items() if n >= BATCH_AT_ONCE)[:2]
    allowed = min(box.allowed(q) for q in box.targets)
    late = [{s: _late([a.service for a in arrivals if a.at == t], standing=s, landed=t,
                      allowed=allowed, concurrency=tq.spec.worker.concurrency,
                      poll=scaling.pollIntervalSeconds, more=scaling.maxReplicas)
             for s in STANDING} for t in landings]
    budget = 0.05 * len(arrivals)
    spare = (families.KEDA_COST - 1) * box.keda_seconds
    cheapest: tuple[float, tuple[int, ...]] | None = None
    for held in itertools.product(STANDING, repeat=len(landings)):
        if sum(late[i][s] for i, s in enumerate(held)) > budget:
            continue
        # idle pods beyond the one the trickle keeps, from the start (or the batch before)
        cost = sum((s - 1) * (t - (landings[i - 1] if i else 0.0))
                   for i, (s, t) in enumerate(zip(held, landings, strict=True)))
        if cheapest is None or cost < cheapest[0]:
            cheapest = (cost, held)
    return {"run": name, "tasks": len(arrivals), "late_allowed": budget, "allowance": allowed,
            "landings": landings,
            "late_by_standing_pods": [{str(s): n for s, n in x.items()} for x in late],
            "cheapest_standing": None if cheapest is None else list(cheapest[1]),
            "cheapest_idle_worker_seconds": None if cheapest is None else cheapest[0],
            "spare_worker_seconds": spare,
            "measured_only": late[0][1] <= budget,
            "reachable": cheapest is not None and cheapest[0] <= spare}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="comma list of frontier.RUNS names")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    names = [n for n in frontier.RUNS if n.startswith("batches")
             and (not args.only or n in args.only.split(","))]
    rows = [first_batches(n) for n in names]
    print("| run | tasks (5 % late allowed) | box p95 | 1st / 2nd batch lands | late with 1..4 "
          "standing pods: 1st; 2nd | cheapest standing pods within 5 % late (idle worker-s) "
          "| 0.5x keda-tuned | verdict |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        late = "; ".join(" / ".join(str(x[str(s)]) for s in range(1, 5))
                         for x in r["late_by_standing_pods"])
        held = ("none of 1..8" if r["cheapest_standing"] is None else
                f"{' + '.join(map(str, r['cheapest_standing']))} "
                f"({r['cheapest_idle_worker_seconds']:,.0f})")
        lands = " / ".join(f"{t:.1f} s" for t in r["landings"])
        verdict = ("not ruled out" if r["measured_only"] else
                   "out of reach for a policy holding pods only for traffic it measured"
                   + ("; in reach only for idle pods held for batches not yet seen"
                      if r["reachable"] else ""))
        print(f"| {r['run']} | {r['tasks']} ({r['late_allowed']:.1f}) | {r['allowance']:.2f} s "
              f"| {lands} | {late} | {held} | {r['spare_worker_seconds']:,.0f} | {verdict} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
