"""Text and JSON views of simulation results: a table, a replica/backlog plot, a timeline CSV."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from taskqueue.simulate.run import Result

BARS = " ▁▂▃▄▅▆▇█"


def as_dict(r: Result) -> dict[str, Any]:
    return {
        "scaler": r.scaler,
        "worker_seconds": round(r.worker_seconds, 1),
        "mean_replicas": round(r.mean_replicas, 3),
        "max_replicas": r.max_replicas,
        "wait_seconds": {q: {"p50": round(w[0], 3), "p95": round(w[1], 3), "p99": round(w[2], 3)}
                         for q, w in r.waits.items()},
        "tasks": r.tasks,
        "interrupted_tasks": r.interrupted,
        "unserved_tasks": r.unserved,
        "busy_pods_deleted": r.busy_deleted,
        "pods_deleted": r.deleted,
        "scale_changes": r.scale_changes,
        "zero_after_seconds": None if r.zero_after is None else round(r.zero_after, 1),
    }


def to_json(results: Sequence[Result]) -> str:
    return json.dumps([as_dict(r) for r in results], indent=2)


def table(results: Sequence[Result]) -> str:
    """One row per scaler and queue; cost relative to the first result."""
    width = max([10, *(len(q) for r in results for q in r.waits)])
    head = (f"{'scaler':<20} {'worker-s':>9} {'x':>5} {'mean':>6} {'max':>4} {'queue':<{width}} "
            f"{'p50':>7} {'p95':>7} {'p99':>7} {'interr':>6} {'busy-del':>8} {'changes':>7} "
            f"{'zero':>6}")
    lines = [head]
    base = results[0].worker_seconds if results else 0.0
    for r in results:
        ratio = r.worker_seconds / base if base else 0.0
        zero = "never" if r.zero_after is None else f"{r.zero_after:.0f}s"
        for i, (q, (p50, p95, p99)) in enumerate(r.waits.items()):
            lead = (f"{r.scaler:<20} {r.worker_seconds:>9.0f} {ratio:>5.2f} "
                    f"{r.mean_replicas:>6.2f} {r.max_replicas:>4}") if i == 0 else " " * 47
            tail = (f" {r.interrupted:>6} {r.busy_deleted:>8} {r.scale_changes:>7} {zero:>6}"
                    if i == 0 else "")
            lines.append(f"{lead} {q:<{width}} {p50:>7.2f} {p95:>7.2f} {p99:>7.2f}{tail}")
    lines += [f"{r.scaler}: {r.unserved} task(s) not completed by the end of the run (one never "
              "started counts in the waits as waiting until then)" for r in results if r.unserved]
    return "\n".join(lines)


def sparkline(values: Sequence[float], width: int = 72) -> str:
    """`values` squeezed into `width` characters (the max of each bucket)."""
    if not values:
        return ""
    size = max(1, -(-len(values) // width))
    buckets = [max(values[i:i + size]) for i in range(0, len(values), size)]
    top = max(buckets) or 1.0
    return "".join(BARS[round(v / top * (len(BARS) - 1))] for v in buckets)


def plot(results: Sequence[Result], width: int = 72) -> str:
    """Replicas and backlog over time, one line each per scaler."""
    lines = []
    for r in results:
        pods = [float(p) for _, p, _ in r.timeline]
        queued = [float(q) for _, _, q in r.timeline]
        lines.append(f"{r.scaler:<20} replicas (max {max(pods, default=0):.0f}) "
                     f"{sparkline(pods, width)}")
        lines.append(f"{'':<20} backlog  (max {max(queued, default=0):.0f}) "
                     f"{sparkline(queued, width)}")
    return "\n".join(lines)


def timeline_csv(results: Sequence[Result]) -> str:
    rows = ["scaler,time,replicas,backlog"]
    for r in results:
        rows += [f"{r.scaler},{t:.1f},{p},{q}" for t, p, q in r.timeline]
    return "\n".join(rows) + "\n"
