"""How much a replay from history (`taskqueue simulate --from-history`) loses to the history's
interval: every built-in trace of bench/scaling/run.py, simulated as generated (task by task) and
as rebuilt from history points of `--interval` seconds (`taskqueue.simulate.replay`: counts per
interval, service-time mean and variance per interval), for this operator and the tuned KEDA
model. Prints worker-seconds and p95 wait (worst queue) of both, and their ratio, and beside
them the p95 of another draw of the same generator (another seed): how much two samples of
the same traffic differ anyway.

The points are made from the trace itself: the arrivals of each interval, and the service times
of the tasks that arrived in it (the operator's writer counts a task's time in the interval it
ends in, later by its wait and service; per interval the difference is a shift of those times by
under a task's duration). Both runs start with the service totals known (`Settings.history`,
300 attempts, as `--from-history` does).

    python bench/scaling/replay.py [--duration 3600] [--interval 10] [--concurrency 1,4]
                                   [--only TRACES] [--seeds 1]
    python bench/scaling/replay.py --cli-day [--tick 0.1]

`--cli-day` times the command itself instead: a day of diurnal traffic (concurrency 4) written
as history points into a private redis-server (through the history's own encoding), then
`taskqueue simulate --from-history` run on it as a subprocess.

Not part of the tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from taskqueue.simulate import replay, trace
from taskqueue.simulate.run import Result, Settings, simulate
from taskqueue.simulate.scalers import KEDA_TUNED, KedaScaler, OperatorScaler
from taskqueue.wire.history import HistoryPoint, QueuePoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import RATES, SERVICE, taskqueue

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))
from poll_load import start_redis

T0 = 1_767_225_600_000
KNOWN = 300


def points(arrivals: list[trace.Arrival], *, queues: list[str], interval: float,
           duration: float) -> list[HistoryPoint]:
    """History points of `interval` seconds over `duration` holding the trace's counts."""
    size = round(interval * 1000)
    count = int(max(duration, arrivals[-1].at if arrivals else 0) * 1000 // size) + 1
    sums: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for a in arrivals:
        s = sums[(int(a.at * 1000) // size, a.queue)]
        s[0] += 1
        s[1] += a.service * 1000
        s[2] += (a.service * 1000) ** 2
    out = []
    for i in range(count):
        got = {q: sums.get((i, q), [0, 0.0, 0.0]) for q in queues}
        out.append(HistoryPoint(
            t=T0 + (i + 1) * size, dt=size, desired=0, replicas=0, ready=0, inflight=0,
            workers=0, queues={q: QueuePoint(backlog=0, arrived=int(n), attempts=int(n),
                                             service_ms=round(ms), service_sq_ms2=round(sq))
                               for q, (n, ms, sq) in got.items()}))
    return out


def generated(name: str, concurrency: int, duration: float, seed: int,
              keys: list[str]) -> list[trace.Arrival]:
    original = trace.generate(name, trace.Load(rate=RATES[name] * concurrency, service=SERVICE,
                                               duration=duration, seed=seed, queue=keys[0]))
    if name == "two-priority":
        rename = {trace.HIGH: keys[0], trace.LOW: keys[1]}
        original = [trace.Arrival(a.at, rename[a.queue], a.service) for a in original]
    return original


def compare(name: str, concurrency: int, duration: float, interval: float,
            seed: int) -> list[tuple[str, Result, Result, Result]]:
    tq = taskqueue(concurrency, name, [])
    keys = [q.key for q in tq.spec.queues]
    original = generated(name, concurrency, duration, seed, keys)
    other = generated(name, concurrency, duration, seed + 1000, keys)
    window = replay.Window(tuple(points(original, queues=keys, interval=interval,
                                        duration=duration)))
    rebuilt = replay.rebuild(window, queues=keys, seed=seed).arrivals
    settings = Settings(history=KNOWN)
    out = []
    for label, make in (("operator", lambda: OperatorScaler(tq)),
                        ("keda-tuned", lambda: KedaScaler(tq, KEDA_TUNED))):
        out.append((label, simulate(tq, original, make(), settings),
                    simulate(tq, rebuilt, make(), settings),
                    simulate(tq, other, make(), settings)))
    return out


def cli_day(tick: float) -> None:
    """Time `taskqueue simulate --from-history` on a day of history (8640 points)."""
    import redis

    tq = taskqueue(4, "diurnal", [])
    keys = [q.key for q in tq.spec.queues]
    day = generated("diurnal", 4, 86400.0, 1, keys)
    made = points(day, queues=keys, interval=10.0, duration=86400.0)
    now = int(time.time() * 1000)
    shift = now - made[-1].t
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_redis(tmp)
        try:
            r = redis.Redis.from_url(url)
            with r.pipeline(transaction=False) as pipe:
                for p in made:
                    moved = HistoryPoint(**{**p.__dict__, "t": p.t + shift, "replicas": 1})
                    pipe.xadd("tasks:history", moved.fields(), id=f"{moved.t}-0")
                pipe.execute()
            doc = {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
                   "metadata": {"name": "bench"},
                   "spec": {"redis": {"url": url}, "queues": [{"key": k} for k in keys],
                            "worker": {"concurrency": 4},
                            "scaling": tq.spec.scaling.model_dump(exclude_defaults=True)}}
            path = Path(tmp) / "tq.json"
            path.write_text(json.dumps(doc))
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "taskqueue.cli.main", "simulate", "--from-history",
                 "bench", "--current", str(path), "-f", str(path), "--tick", str(tick)],
                capture_output=True, text=True, check=False)
            took = time.perf_counter() - started
            print(done.stdout + done.stderr)
            print(f"{len(day)} tasks, {len(made)} points, --tick {tick:g}: {took:.1f} s")
        finally:
            proc.terminate()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--duration", type=float, default=3600.0)
    p.add_argument("--interval", type=float, default=10.0)
    p.add_argument("--concurrency", default="1,4")
    p.add_argument("--only", default="")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--cli-day", action="store_true")
    p.add_argument("--tick", type=float, default=0.1)
    args = p.parse_args(argv)
    if args.cli_day:
        cli_day(args.tick)
        return 0
    names = [n for n in trace.GENERATORS if not args.only or n in args.only.split(",")]
    print(f"interval {args.interval:g} s, {args.duration:g} s per trace, seeds 1-{args.seeds}")
    print("| trace | c | seed | scaler | worker-s (trace) | worker-s (replay) | ratio | "
          "p95 (trace) | p95 (replay) | ratio | p95 (another draw) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    started = time.perf_counter()
    for name in names:
        for c in (int(x) for x in args.concurrency.split(",")):
            for seed in range(1, args.seeds + 1):
                for label, a, b, o in compare(name, c, args.duration, args.interval, seed):
                    cost = b.worker_seconds / a.worker_seconds if a.worker_seconds else 0.0
                    wait = f"{b.p95() / a.p95():.2f}" if a.p95() else "-"
                    print(f"| {name} | {c} | {seed} | {label} | {a.worker_seconds:.0f} | "
                          f"{b.worker_seconds:.0f} | {cost:.2f} | {a.p95():.2f} | "
                          f"{b.p95():.2f} | {wait} | {o.p95():.2f} |", flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
