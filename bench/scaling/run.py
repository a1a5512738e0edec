"""Scaling benchmark: every built-in trace at concurrency 1 and 4, this operator vs KEDA + HPA.

Runs `taskqueue.simulate` (the real `policy.decide` and scale-in) with one manifest per
concurrency (bench/scaling/taskqueue.yaml: defaults, plus targetWaitSeconds 2 s on the first
queue and 10 s on the low one) and prints a markdown table and the issue-11 targets, met or not.

    python bench/scaling/run.py [--duration 3600] [--json results.json] [--set key=value ...]
                                [--warm N] [--expected] [--only TRACES] [--concurrency 1,4]

`--set scaling.idleCooldownSeconds=30` (repeatable) overrides a manifest field for a what-if.
`--expected` writes each queue's nominal mean service time (the generator's, what a user who
knows their tasks would write) into `scaling.expectedServiceSeconds`; without it the manifest
has none, as a TaskQueue whose user wrote nothing about its tasks.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any

import yaml

# this checkout's operator/ first, whatever the environment's editable install points at: a
# bench run from a worktree (a base to compare with) measures that worktree's policy
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "operator"))

from taskqueue.api import manifest
from taskqueue.api.models import TaskQueue
from taskqueue.simulate import report, trace
from taskqueue.simulate.run import Result, Scaler, Settings, simulate
from taskqueue.simulate.scalers import KEDA_DEFAULTS, KEDA_TUNED, KedaScaler, OperatorScaler

HERE = Path(__file__).resolve().parent
SERVICE = 2.0
# tasks/s per slot of concurrency (rate = this x concurrency), chosen so each trace needs a few
# to ~20 pods: steady needs 4.9 pods at either concurrency (the example)
RATES = {"steady": 2.45, "bursty": 0.5, "spikes": 0.5, "diurnal": 1.0, "long": 0.5,
         "two-priority": 1.0}
COMPARED = ("bursty", "spikes", "diurnal", "two-priority")
NOMINAL_SERVICE = {"long": (30 * SERVICE,), "two-priority": (SERVICE / 4, SERVICE)}
"""Each queue's mean service time as the generator draws it (default: SERVICE)."""
OWN_TARGETS = ("steady", "diurnal", "two-priority")
"""Traces whose tasks can all meet the manifest's wait targets (on bursty and spikes, a burst's
tasks wait at least a poll plus the pod start-up: more than the 2 s target)."""


def taskqueue(concurrency: int, name: str, overrides: list[str],
              expected: bool = False) -> TaskQueue:
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load((HERE / "taskqueue.yaml").read_text()))
    spec = data["spec"]
    spec["worker"]["concurrency"] = concurrency
    if name != "two-priority":
        spec["queues"] = spec["queues"][:1]
        spec["scaling"]["targetWaitSeconds"].pop("low", None)
    if expected:
        means = NOMINAL_SERVICE.get(name, (SERVICE,))
        spec["scaling"]["expectedServiceSeconds"] = {
            q["key"]: s for q, s in zip(spec["queues"], means, strict=False)}
    return taskqueue_from(data, overrides)


def taskqueue_from(data: dict[str, Any], overrides: list[str]) -> TaskQueue:
    """The TaskQueue of manifest `data` with `--set` overrides (key.path=yaml) applied."""
    spec = data["spec"]
    for item in overrides:
        path, _, value = item.partition("=")
        node = spec
        *parents, leaf = path.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = yaml.safe_load(value)
    return manifest.parse(data)


def run(name: str, concurrency: int, duration: float, overrides: list[str],
        history: int = 0, expected: bool = False) -> list[Result]:
    tq = taskqueue(concurrency, name, overrides, expected)
    keys = [q.key for q in tq.spec.queues]
    arrivals = trace.generate(name, trace.Load(rate=RATES[name] * concurrency, service=SERVICE,
                                               duration=duration, queue=keys[0]))
    if name == "two-priority":
        rename = {trace.HIGH: keys[0], trace.LOW: keys[1]}
        arrivals = [trace.Arrival(a.at, rename[a.queue], a.service) for a in arrivals]
    scalers: list[Scaler] = [OperatorScaler(tq), KedaScaler(tq, KEDA_TUNED),
                             KedaScaler(tq, KEDA_DEFAULTS)]
    return [simulate(tq, arrivals, s, Settings(history=history)) for s in scalers]


def back_to_zero(result: Result, cooldown: float, poll: float) -> bool:
    """The fleet reached zero within idleCooldownSeconds + one poll of its last completion
    (+ 1 s: the poll that sees the cooldown pass and the API call after it)."""
    return result.zero_after is not None and result.zero_after <= cooldown + poll + 1


def checks(name: str, concurrency: int, results: list[Result], cooldown: float, poll: float,
           targets: dict[str, float] | None = None) -> list[tuple[str, bool, str]]:
    ours, tuned, defaults = results
    out = [("no busy pod deleted, no task interrupted, every task completed",
            ours.busy_deleted == 0 and ours.interrupted == 0 and ours.unserved == 0,
            f"{ours.busy_deleted} busy pods deleted, {ours.interrupted} interrupted, "
            f"{ours.unserved} not completed")]
    zero_ok = back_to_zero(ours, cooldown, poll)
    out.append(("back to zero within idleCooldownSeconds + one poll", zero_ok,
                f"{ours.zero_after if ours.zero_after is None else round(ours.zero_after, 1)}s"
                f" (limit {cooldown + poll:g}s)"))
    if name == "steady" and concurrency == 4:
        need = RATES[name] * concurrency * SERVICE / concurrency
        out.append(("mean replicas <= 1.25 x need", ours.mean_replicas <= 1.25 * need,
                    f"{ours.mean_replicas:.2f} / {need:.2f} = {ours.mean_replicas / need:.2f}x"))
        out.append(("p95 wait <= 2 s", ours.p95() <= 2.0, f"{ours.p95():.2f}s"))
    if name in OWN_TARGETS:
        for q, target in (targets or {}).items():
            p95 = ours.waits[q][1]
            out.append((f"p95 wait of {q} <= its targetWaitSeconds", p95 <= target,
                        f"{p95:.2f}s (target {target:g}s)"))
    if name in COMPARED:
        cost = ours.worker_seconds / tuned.worker_seconds
        out.append(("worker-seconds <= 1.2 x keda-tuned", cost <= 1.2, f"{cost:.2f}x"))
        for q, w in ours.waits.items():
            theirs = tuned.waits[q][1]
            ratio = w[1] / theirs if theirs else float("inf")
            out.append((f"p95 wait of {q} <= 0.5 x keda-tuned", w[1] <= 0.5 * theirs,
                        f"{w[1]:.2f}s vs {theirs:.2f}s = {ratio:.2f}x"))
        vs_defaults = ours.worker_seconds / defaults.worker_seconds
        out.append(("worker-seconds <= 0.5 x keda defaults", vs_defaults <= 0.5,
                    f"{vs_defaults:.2f}x"))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=3600.0)
    parser.add_argument("--only", default="", help="comma list of traces (default: all)")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    parser.add_argument("--warm", type=int, default=0, metavar="N",
                        help="start with N attempts per queue in the service totals (a "
                             "TaskQueue that ran before; default 0: a new one)")
    parser.add_argument("--expected", action="store_true",
                        help="set scaling.expectedServiceSeconds to each queue's nominal mean "
                             "service time (default: unset, a TaskQueue that says nothing)")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    names = [n for n in trace.GENERATORS if not args.only or n in args.only.split(",")]
    everything: list[dict[str, Any]] = []
    failed = 0
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        for name in names:
            results = run(name, concurrency, args.duration, args.overrides, args.warm,
                          args.expected)
            tq = taskqueue(concurrency, name, args.overrides, args.expected)
            print(f"\n### {name}, concurrency {concurrency}\n```")
            print(report.table(results))
            print("```")
            poll = tq.spec.scaling.pollIntervalSeconds
            churn = {r.scaler: (r.scale_changes, r.reversals(2 * poll)) for r in results}
            print("- scale changes (reversed within two polls): "
                  + ", ".join(f"{s} {n} ({f})" for s, (n, f) in churn.items()))
            verdicts = checks(name, concurrency, results, tq.spec.scaling.idleCooldownSeconds,
                              tq.spec.scaling.pollIntervalSeconds,
                              tq.spec.scaling.targetWaitSeconds)
            for what, ok, figure in verdicts:
                failed += not ok
                print(f"- {'MET' if ok else 'NOT MET'}: {what}: {figure}")
            everything.append({"trace": name, "concurrency": concurrency,
                               "results": [report.as_dict(r) for r in results],
                               "reversed_within_two_polls": {s: f for s, (_, f) in churn.items()},
                               "targets": [{"target": w, "met": ok, "figure": f}
                                           for w, ok, f in verdicts]})
    if args.json:
        Path(args.json).write_text(json.dumps(everything, indent=1) + "\n")
    print(f"\n{failed} target check(s) not met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
