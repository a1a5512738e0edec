"""Where the fast test tier's time goes: each test's wall time and CPU time, per xdist worker.

As a pytest plugin it appends one JSON line per test (setup, call and teardown together) to
`$TEST_DURATIONS_OUT-<worker>.jsonl`: the wall time, the CPU time of the test process (every
thread: in-process workers, Redis clients) and of the child processes reaped meanwhile (worker
and CLI processes, redis-servers a test owns; a module's Chromium counts when its browser
closes). Run as a script it sums the lines: the tests' durations against their CPU time (the
tests mostly wait, so workers overlap on 2 cores), each worker's busy time and end, the tests
that finished last (the tail), and the longest tests.

    TEST_DURATIONS_OUT=/tmp/durations/run PYTHONPATH=bench/tests:$PYTHONPATH \
        TASKQUEUE_INVARIANT_SEEDS=10 TASKQUEUE_FUZZ_DIVISOR=4 python -m pytest tests/unit \
        tests/redis -m "not slow" -n 4 --dist worksteal -p durations
    python bench/tests/durations.py /tmp/durations/run
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import resource
import time
from collections.abc import Iterator
from typing import Any

import pytest

OUT_ENV = "TEST_DURATIONS_OUT"


def _cpu() -> tuple[float, float]:
    """CPU seconds (user + system) of this process and of its reaped children."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    started, (own, children) = time.monotonic(), _cpu()
    yield
    ended, (own_after, children_after) = time.monotonic(), _cpu()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    line = {"id": item.nodeid, "worker": worker, "start": started, "end": ended,
            "wall": ended - started, "cpu": own_after - own,
            "children": children_after - children}
    with open(f"{os.environ.get(OUT_ENV, 'test-durations')}-{worker}.jsonl", "a") as out:
        out.write(json.dumps(line) + "\n")


def summary(rows: list[dict[str, Any]], *, top: int) -> list[str]:
    """The report's lines for the JSON lines of one run. Pure."""
    if not rows:
        return ["no tests recorded"]
    zero = min(r["start"] for r in rows)
    lines = [f"{len(rows)} tests: durations {sum(r['wall'] for r in rows):.1f} s, CPU "
             f"{sum(r['cpu'] for r in rows):.1f} s in the test processes + "
             f"{sum(r['children'] for r in rows):.1f} s in their reaped children"]
    by_worker: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for r in rows:
        by_worker[r["worker"]].append(r)
    for worker, own in sorted(by_worker.items()):
        lines.append(f"  {worker}: {len(own)} tests, busy {sum(r['wall'] for r in own):.1f} s, "
                     f"ends at {max(r['end'] for r in own) - zero:.1f} s")
    lines.append("the last tests of a second or more to finish (start-end, s from the first "
                 "start):")
    lines += [f"  {r['start'] - zero:6.1f}-{r['end'] - zero:6.1f} {r['worker']} {r['id']}"
              for r in sorted((r for r in rows if r["wall"] >= 1), key=lambda r: r["end"])[-top:]]
    lines.append("the longest (wall, CPU own + children):")
    lines += [f"  {r['wall']:5.1f} s  {r['cpu'] + r['children']:5.1f} s  {r['id']}"
              for r in sorted(rows, key=lambda r: -r["wall"])[:top]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the TEST_DURATIONS_OUT of the run")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for path in sorted(glob.glob(f"{args.out}-*.jsonl")):
        with open(path) as lines:
            rows += [json.loads(line) for line in lines]
    print("\n".join(summary(rows, top=args.top)))


if __name__ == "__main__":
    main()
