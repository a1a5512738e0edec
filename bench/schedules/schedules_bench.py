"""Schedules: the operator's cost per poll and the lateness of a slot's task (slot -> handler).

    python bench/schedules/schedules_bench.py cost [--taskqueues 100 --per 10 --polls 30]
    python bench/schedules/schedules_bench.py lateness [--schedules 10 --seconds 100 --margin 1
                                                        --worker-root CHECKOUT]

`cost`: 1,000 schedules across 100 TaskQueues (each: one every-second schedule, the others
every minute to daily in several zones), polled the way the operator polls them (the plan, one
fire.lua EVALSHA per TaskQueue, the reply read) on a private redis-server; reports the
operator's CPU seconds per second of polling at a 2 s interval (cores), Redis's CPU, and the
round trips per TaskQueue per poll (commandstats). The poll instants are simulated (no
sleeping), so the figure is the work of a real interval's poll.

`lateness`: `--schedules` every-second schedules on one TaskQueue fired by the operator's code
at a 1 s poll (fire-ahead horizon: the 1 s poll + podStartupSeconds 0 + `--margin`, by default
the operator's `schedules.FIRE_MARGIN_SECONDS`) into a private redis-server, run by one real
`taskqueue-worker` (concurrency 16) whose handler records start - slot; reports p50/p99/max over
all slots, then over the slot instants after the first (a new schedule's first slot starts
cold) the latest task of each instant (the tail is whole instants: their tasks are promoted and
fetched together). `--worker-root`: the checkout whose worker code runs (default this one),
for a before/after in one invocation. Not the real node: `bench/schedules/node_lateness.py` is.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
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
import redis.asyncio as aioredis  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402

from taskqueue.api import manifest  # noqa: E402
from taskqueue.controller import schedules  # noqa: E402
from taskqueue.redisio import queueops  # noqa: E402
from taskqueue.wire import keys  # noqa: E402

CRONS = [("* * * * * *", "UTC"), ("*/15 * * * *", "Europe/Berlin"),
         ("30 2 * * *", "Australia/Sydney"), ("0 * * * *", "America/Santiago"),
         ("*/5 * * * *", "UTC"), ("0 9 * * MON-FRI", "America/New_York"),
         ("@daily", "Asia/Tokyo"), ("*/2 * * * *", "UTC"), ("@hourly", "UTC"),
         ("*/30 * * * *", "Europe/London")]


def spec_of(name: str, url: str, n: int, *, every_second: int = 1, poll: float = 2.0,
            startup: float = 30.0) -> object:
    items = [{"name": f"s{i}", "cron": CRONS[0][0] if i < every_second else
              CRONS[1 + i % (len(CRONS) - 1)][0],
              "timeZone": "UTC" if i < every_second else CRONS[1 + i % (len(CRONS) - 1)][1],
              "queue": f"{name}:jobs", "payload": f"{name}-{i}"} for i in range(n)]
    return manifest.parse({"kind": "TaskQueue", "metadata": {"name": name}, "spec": {
        "redis": {"url": url}, "queues": [{"key": f"{name}:jobs"}],
        "scaling": {"pollIntervalSeconds": poll, "podStartupSeconds": startup},
        "schedules": items}}).spec


async def poll_all(client: aioredis.Redis, specs: list, seen: list[dict], now: float,
                   horizon: float) -> None:
    async def one(i: int) -> None:
        spec = specs[i]
        schema = keys.KeySchema.from_spec(spec)
        plans = schedules.plan(spec, schema, seen=seen[i], now=now, horizon=horizon)
        keys_, args = schedules.call(schema, plans)
        reply = await queueops.script("fire")(client, keys=queueops.wire(keys_),
                                              args=queueops.wire(args))
        seen[i] = schedules.seen_after(schedules.parse(reply, plans))
    await asyncio.gather(*(one(i) for i in range(len(specs))))


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def redis_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def cost(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        try:
            r = redis.Redis.from_url(server.url)
            specs = [spec_of(f"tq{i}", server.url, args.per) for i in range(args.taskqueues)]
            seen: list[dict] = [{} for _ in specs]
            client = aioredis.Redis.from_url(server.url)
            start = time.time()
            horizon = 2.0 + 30.0
            asyncio.run(poll_all(client, specs, seen, start, horizon))  # learn, warm up
            client = aioredis.Redis.from_url(server.url)
            r.config_resetstat()
            c0, rc0 = cpu(), redis_cpu(r)

            async def run() -> None:
                for k in range(1, args.polls + 1):
                    await poll_all(client, specs, seen, start + k * args.interval, horizon)
            asyncio.run(run())
            c1, rc1 = cpu(), redis_cpu(r)
            calls = int(r.info("commandstats")["cmdstat_evalsha"]["calls"])
            wall = args.polls * args.interval
            print(f"{len(specs)} TaskQueues x {args.per} schedules, {args.polls} polls "
                  f"every {args.interval:g} s ({wall:g} s of polling)")
            print(f"operator CPU: {c1 - c0:.2f} s = {(c1 - c0) / wall:.4f} cores")
            print(f"redis CPU:    {rc1 - rc0:.2f} s = {(rc1 - rc0) / wall:.4f} cores")
            print(f"round trips per TaskQueue per poll: {calls / args.polls / len(specs):.2f}")
            print(f"tasks fired: {sum(r.zcard(f'tq{i}:jobs:delayed') for i in range(len(specs)))}")
        finally:
            server.stop()


def lateness(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp) / "redis")
        server.start()
        out = Path(tmp) / "lateness.txt"
        root = args.worker_root or ROOT
        env = {**os.environ, "BENCH_LATENESS_FILE": str(out),
               "PYTHONPATH": os.pathsep.join([str(HERE), str(root / "operator"), str(root)])}
        worker = subprocess.Popen(
            [sys.executable, "-m", "taskqueue.worker.main", "--redis-url", server.url,
             "--queue", "late:jobs", "--handler", "lateness_handler:record",
             "--concurrency", "16", "--worker-id", "late-0", "--log-level", "WARNING"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = redis.Redis.from_url(server.url)
            while r.zcard("late:jobs:workers") < 1:
                time.sleep(0.1)
            spec = spec_of("late", server.url, args.schedules, every_second=args.schedules,
                           poll=1.0, startup=0.0)
            seen: list[dict] = [{}]
            client = aioredis.Redis.from_url(server.url)

            async def run() -> None:
                end = time.time() + args.seconds
                while time.time() < end:
                    t = time.time()
                    await poll_all(client, [spec], seen, t, 1.0 + args.margin)
                    await asyncio.sleep(max(0.0, 1.0 - (time.time() - t)))
            asyncio.run(run())
            time.sleep(3)
        finally:
            worker.terminate()
            worker.wait(timeout=60)
            server.stop()
        rows = [line.split() for line in out.read_text().splitlines()]
        report(rows, schedules_n=args.schedules, seconds=args.seconds,
               ahead=1 + args.margin, root=root)


def report(rows: list[list[str]], *, schedules_n: int, seconds: float, ahead: float,
           root: Path) -> None:
    ids = [i for i, _ in rows]
    late = sorted(float(x) * 1000 for _, x in rows)
    q = statistics.quantiles(late, n=100)
    print(f"worker code: {root}")
    print(f"{len(late)} slots ({len(set(ids))} distinct task ids) of {schedules_n} "
          f"every-second schedules over {seconds:g} s, fired {ahead:g} s ahead")
    print(f"lateness slot -> handler start: p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms, "
          f"max {late[-1]:.1f} ms, min {late[0]:.1f} ms")
    instants: dict[str, float] = {}
    for i, x in rows:
        at = i.split(":", 1)[1]
        instants[at] = max(instants.get(at, 0.0), float(x) * 1000)
    later = sorted(instants.items())[1:]
    warm = sorted(float(x) * 1000 for i, x in rows if i.split(":", 1)[1] in dict(later))
    if len(warm) > 1 and later:
        wq = statistics.quantiles(warm, n=100)
        worst_at = sorted((v for _, v in later), reverse=True)
        print(f"after the first slot instant: {len(warm)} slots, p50 {wq[49]:.1f} ms, "
              f"p99 {wq[98]:.1f} ms, max {warm[-1]:.1f} ms; latest task of each of the "
              f"{len(later)} instants: > 20 ms {sum(v > 20 for v in worst_at)}, > 100 ms "
              f"{sum(v > 100 for v in worst_at)}, worst "
              + ", ".join(f"{v:.0f}" for v in worst_at[:5]) + " ms")
    worst = sorted(rows, key=lambda row: -float(row[1]))[:12]
    print("latest:", ", ".join(f"{i} {float(x) * 1000:.0f} ms" for i, x in worst))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--taskqueues", type=int, default=100)
    c.add_argument("--per", type=int, default=10)
    c.add_argument("--polls", type=int, default=30)
    c.add_argument("--interval", type=float, default=2.0)
    late = sub.add_parser("lateness")
    late.add_argument("--schedules", type=int, default=10)
    late.add_argument("--seconds", type=float, default=100.0)
    late.add_argument("--margin", type=float, default=schedules.FIRE_MARGIN_SECONDS,
                      help="seconds fired ahead beyond the 1 s poll (0: the scaler's horizon)")
    late.add_argument("--worker-root", type=Path, default=None,
                      help="the checkout whose worker code runs (default this one)")
    args = p.parse_args()
    (cost if args.what == "cost" else lateness)(args)


if __name__ == "__main__":
    main()
