"""The markdown tables of docs/benchmarks.md's "Scaling (simulated)" section, from the results
`run.py --json` wrote: one table per concurrency, the traces in the order they were run.

    python bench/scaling/tables.py bench/scaling/results.json          # poll 2 s (the default)
    python bench/scaling/tables.py bench/scaling/results-poll5.json    # poll 5 s

The tables hold what the JSON holds, nothing re-run: a change to the policy re-runs `run.py`
and then this, so the document and the committed results cannot drift apart.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HEADER = ("| trace | scaler | worker-s | mean pods | p95 wait | busy pods deleted | interrupted "
          "| scale changes | zero after |\n|---|---|---|---|---|---|---|---|---|")
QUEUE_NAMES = {"tasks": "high", "low": "low"}
"""How the two-priority trace's queues are named in the tables."""


def thousands(value: float) -> str:
    """An integer with a space between thousands (the document's style)."""
    return f"{round(value):,}".replace(",", " ")


def waits(result: dict[str, Any]) -> str:
    """The p95 wait of each queue ("high 0.45 s, low 8.35 s" where there are two); a p95 of
    0 s (most tasks never wait) with the p99 beside it."""
    per_queue = result["wait_seconds"]
    if len(per_queue) == 1:
        (quantiles,) = per_queue.values()
        text = f"{quantiles['p95']:.2f} s"
        if quantiles["p95"] == 0 and quantiles["p99"] > 0:
            text += f" (p99 {quantiles['p99']:.1f} s)"
        return text
    return ", ".join(f"{QUEUE_NAMES.get(q, q)} {w['p95']:.2f} s" for q, w in per_queue.items())


def zero_after(result: dict[str, Any]) -> str:
    """Seconds from the last task served to zero pods, or why the run never got there."""
    unserved = result["unserved_tasks"]
    if unserved == 1:
        return "never (1 task never completes)"
    if unserved:
        return f"never ({unserved} tasks never complete)"
    seconds = result["zero_after_seconds"]
    return "never" if seconds is None else f"{seconds:.0f} s"


def row(trace: str, result: dict[str, Any], reversed_: int) -> str:
    scaler = result["scaler"]
    name = f"**{scaler}**" if scaler == "operator" else scaler
    return (f"| {trace} | {name} | {thousands(result['worker_seconds'])} "
            f"| {result['mean_replicas']:.2f} | {waits(result)} "
            f"| {thousands(result['busy_pods_deleted'])} "
            f"| {thousands(result['interrupted_tasks'])} "
            f"| {thousands(result['scale_changes'])} ({reversed_}) | {zero_after(result)} |")


def tables(runs: list[dict[str, Any]]) -> str:
    """One markdown table per concurrency (highest first, as the document has them)."""
    out: list[str] = []
    for concurrency in sorted({r["concurrency"] for r in runs}, reverse=True):
        out += [f"#### Concurrency {concurrency}", HEADER]
        for run in (r for r in runs if r["concurrency"] == concurrency):
            for i, result in enumerate(run["results"]):
                reversed_ = run["reversed_within_two_polls"][result["scaler"]]
                out.append(row(run["trace"] if i == 0 else "", result, reversed_))
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a JSON file run.py --json wrote")
    args = parser.parse_args(argv)
    print(tables(json.loads(args.results.read_text())), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
