"""Fairness benchmark (seed 000 §8.1.5, 004 §2.2): how evenly one queue's tasks spread over
many workers, and how late scheduled tasks start.

    python bench/fairness/fairness.py                      # 16 workers x concurrency 1
    python bench/fairness/fairness.py --workers 8 --rounds 20 --only saturated

Scenarios (each with our AtLeastOnce fetch and, for contrast, AtMostOnce = the seed's BRPOP):
- saturated: all tasks queued at once (workers x rounds tasks of --task-seconds); reports each
  worker's share vs the mean (target: within +-10 %) and the *lag*: the most tasks one worker
  took while another waited between two of its own pickups (the seed's rule: no worker waits
  more than one round while others take two, i.e. lag <= 2).
- light: tasks arrive at --light-load of the fleet's capacity; reports the spread of shares.
- schedule: --scheduled tasks due over a few seconds, idle fleet; reports the lateness
  (start time - due time) p50/p99/max.
- idempotency: the cost of spec.worker.idempotency: --cost-tasks no-op tasks through one worker
  process (concurrency 1, prefetch 1), with and without --idempotency-window; tasks/s.

Worker processes are real `taskqueue-worker`s on a private redis-server. Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT), str(HERE)]

import redis  # noqa: E402
import tasks  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402
from tests.redis.seeds.fairness import max_lag, shares  # noqa: E402

from taskqueue import client as producer  # noqa: E402

QUEUE = "fair"


def start_workers(url: str, n: int, *, handler: str, delivery: str,
                  extra: tuple[str, ...] = ()) -> list[subprocess.Popen[bytes]]:
    env = {**os.environ, "BENCH_REDIS_URL": url,
           "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT / "operator"), str(ROOT)])}
    return [subprocess.Popen(
        [sys.executable, "-m", "taskqueue.worker.main", "--redis-url", url, "--queue", QUEUE,
         "--handler", handler, "--concurrency", "1", "--prefetch", "1", "--delivery", delivery,
         "--worker-id", f"fair-{i}", "--log-level", "WARNING", *extra],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(n)]


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=60)


def wait_registered(r: redis.Redis, n: int) -> None:
    deadline = time.monotonic() + 120
    while r.zcard(f"{QUEUE}:workers") < n:
        if time.monotonic() > deadline:
            raise SystemExit("workers did not register within 120 s")
        time.sleep(0.1)
    time.sleep(1.0)  # every slot idle and waiting


def pickups(r: redis.Redis) -> list[tuple[int, float]]:
    out = []
    for raw in r.lrange(tasks.LOG, 0, -1):
        pid, at = raw.decode().split()
        out.append((int(pid), float(at)))
    return sorted(out, key=lambda p: p[1])


def saturated(r: redis.Redis, procs: list[subprocess.Popen[bytes]], args: argparse.Namespace
              ) -> dict[str, object]:
    total = args.workers * args.rounds
    producer.enqueue_many_sync(r, QUEUE, [str(args.task_seconds)] * total)
    deadline = time.monotonic() + 60 + 3 * args.rounds * args.task_seconds
    while r.llen(tasks.LOG) < total and time.monotonic() < deadline:
        time.sleep(0.05)
    order = [pid for pid, _ in pickups(r)]
    pids = [p.pid for p in procs]
    return {"tasks": len(order), **shares(order, pids), "max_lag": max_lag(order, pids)}


def light(r: redis.Redis, procs: list[subprocess.Popen[bytes]], args: argparse.Namespace
          ) -> dict[str, object]:
    rate = args.light_load * args.workers / args.task_seconds
    total = int(rate * args.light_seconds)
    start = time.monotonic()
    for i in range(total):
        time.sleep(max(0.0, start + i / rate - time.monotonic()))
        producer.enqueue_sync(r, QUEUE, str(args.task_seconds))
    deadline = time.monotonic() + 30
    while r.llen(tasks.LOG) < total and time.monotonic() < deadline:
        time.sleep(0.05)
    order = [pid for pid, _ in pickups(r)]
    return {"tasks": len(order), "rate_per_s": round(rate, 1),
            **shares(order, [p.pid for p in procs])}


def schedule(r: redis.Redis, args: argparse.Namespace) -> dict[str, object]:
    now = time.time()
    for i in range(args.scheduled):
        at = now + 1.0 + 4.0 * i / args.scheduled
        producer.enqueue_sync(r, QUEUE, f"{at:.6f}", at=at)
    deadline = time.monotonic() + 30
    while r.llen(tasks.LOG) < args.scheduled and time.monotonic() < deadline:
        time.sleep(0.05)
    late = sorted(float(x) for x in r.lrange(tasks.LOG, 0, -1))
    q = statistics.quantiles(late, n=100, method="inclusive")
    return {"tasks": len(late), "p50_ms": round(1000 * q[49], 1),
            "p99_ms": round(1000 * q[98], 1), "max_ms": round(1000 * late[-1], 1),
            "early": sum(1 for x in late if x < 0)}


def cost(url: str, args: argparse.Namespace) -> list[dict[str, object]]:
    """No-op tasks/s through one worker process, with and without idempotency."""
    out = []
    for extra in ((), ("--idempotency-window", "3600")):
        r = redis.Redis.from_url(url)
        r.flushall()
        procs = start_workers(url, 1, handler="taskqueue.worker.builtin:noop",
                              delivery="AtLeastOnce", extra=extra)
        try:
            wait_registered(r, 1)
            producer.enqueue_many_sync(r, QUEUE, ["x"] * args.cost_tasks)
            started = time.perf_counter()
            while int(r.hget(f"{QUEUE}:stats", "completed") or 0) < args.cost_tasks:
                time.sleep(0.005)
            elapsed = time.perf_counter() - started
        finally:
            stop(procs)
        out.append({"scenario": "idempotency", "idempotency": bool(extra),
                    "tasks": args.cost_tasks, "tasks_per_s": round(args.cost_tasks / elapsed)})
    return out


def run(url: str, scenario: str, delivery: str, args: argparse.Namespace) -> dict[str, object]:
    r = redis.Redis.from_url(url)
    r.flushall()
    handler = "tasks:due" if scenario == "schedule" else "tasks:work"
    n = args.schedule_workers if scenario == "schedule" else args.workers
    procs = start_workers(url, n, handler=handler, delivery=delivery)
    try:
        wait_registered(r, n)
        if scenario == "saturated":
            result = saturated(r, procs, args)
        elif scenario == "light":
            result = light(r, procs, args)
        else:
            result = schedule(r, args)
    finally:
        stop(procs)
    return {"scenario": scenario, "delivery": delivery, "workers": n, **result}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--task-seconds", type=float, default=0.05)
    p.add_argument("--light-load", type=float, default=0.25)
    p.add_argument("--light-seconds", type=float, default=8.0)
    p.add_argument("--scheduled", type=int, default=200)
    p.add_argument("--schedule-workers", type=int, default=2)
    p.add_argument("--cost-tasks", type=int, default=3000)
    p.add_argument("--only", choices=["saturated", "light", "schedule", "idempotency"],
                   action="append")
    p.add_argument("--delivery", choices=["AtLeastOnce", "AtMostOnce"], action="append")
    args = p.parse_args()
    server = RedisServer(data_dir=Path(tempfile.mkdtemp(prefix="fair-redis-")))
    server.start()
    print(f"load average before: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    try:
        for scenario in args.only or ["saturated", "light", "schedule", "idempotency"]:
            if scenario == "idempotency":
                for result in cost(server.url, args):
                    result["load_average"] = round(os.getloadavg()[0], 1)
                    print(json.dumps(result), flush=True)
                continue
            deliveries = ["AtLeastOnce"] if scenario == "schedule" else (
                args.delivery or ["AtLeastOnce", "AtMostOnce"])
            for delivery in deliveries:
                result = run(server.url, scenario, delivery, args)
                result["load_average"] = round(os.getloadavg()[0], 1)
                print(json.dumps(result), flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
