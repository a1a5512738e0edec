"""Redis memory of the history and the decision log (`taskqueue.wire.history`), by MEMORY USAGE.

Writes a day of history points (one per 10 s: 8640) for TaskQueues of 1, 4 and 32 queues and 1000
decision entries, through the real encoding and the XADD ... MAXLEN ~ the operator sends, into a
private redis-server (default stream settings), and prints the bytes per entry and per day.
The values are drawn with the magnitudes a busy TaskQueue shows (tens of tasks per interval,
seconds of service time, reasons as the policy words them).

    python bench/operator/history_memory.py [--interval 10] [--seed 1]

Not part of the tests.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

import redis

from taskqueue.wire import history

sys.path.insert(0, str(Path(__file__).resolve().parent))
from poll_load import start_redis

REASONS = (
    "demand {n} ({n} queued + 0 in flight) / target 10 = {r}; scale up {p} -> {r}",
    "demand {n} ({n} queued + 2 in flight) / target 10 = {r}; hold {r} (highest in the "
    "stabilisation window: {p})",
    "p95 wait of q-0 2 s with 0.8/s of 1.9 s tasks: 6 slots / concurrency 4 = {r}; "
    "scale down {p} -> {r}; quiesced 1 pod(s), 1 drained",
    "idle 12s < idleCooldownSeconds 30; scale down {p} -> 1",
)
RULES = ("scale-up", "stabilisation-window", "scale-down", "idle-cooldown")


def point(rng: random.Random, t: int, interval: int, queues: list[str]) -> history.HistoryPoint:
    return history.HistoryPoint(
        t=t, dt=interval * 1000 + rng.randint(-40, 40), desired=rng.randint(2, 12),
        replicas=rng.randint(2, 12), ready=rng.randint(2, 12), inflight=rng.randint(0, 48),
        workers=rng.randint(2, 12), completed=rng.randint(0, 200), failed=rng.randint(0, 3),
        queues={q: history.QueuePoint(
            backlog=rng.randint(0, 500), arrived=rng.randint(0, 200),
            attempts=rng.randint(0, 200), service_ms=rng.randint(0, 400_000),
            service_sq_ms2=rng.randint(0, 900_000_000),
            oldest_ms=rng.choice([None, rng.randint(0, 60_000)]),
            p95_wait_ms=rng.choice([None, rng.randint(0, 10_000)])) for q in queues})


def decision(rng: random.Random, t: int) -> history.DecisionEntry:
    i, p, r = rng.randrange(len(REASONS)), rng.randint(1, 12), rng.randint(1, 12)
    n = rng.randint(0, 120)
    quiesced = tuple(f"emails-worker-7d9f8b6c5-{rng.randrange(36**5):05x}"
                     for _ in range(rng.choice([0, 0, 0, 1, 2])))
    return history.DecisionEntry(t=t, previous=p, replicas=r, recommendation=r, rule=RULES[i],
                                 reason=REASONS[i].format(n=n, p=p, r=r), backlog=n,
                                 inflight=rng.randint(0, 48), quiesced=quiesced,
                                 removed=max(0, p - r))


def fill(r: redis.Redis, key: str, fields: list[dict[str, str]], maxlen: int) -> int:
    with r.pipeline(transaction=False) as pipe:
        for f in fields:
            pipe.xadd(key, dict(f), maxlen=maxlen, approximate=True)
        pipe.execute()
    return int(r.memory_usage(key, samples=0) or 0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--interval", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    rng = random.Random(args.seed)
    day = 86400 // args.interval
    t0 = 1_767_225_600_000
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_redis(tmp)
        try:
            r = redis.Redis.from_url(url)
            print(f"| stream | entries | MEMORY USAGE | per entry | per day (one per "
                  f"{args.interval} s) |")
            print("|---|---|---|---|---|")
            for n in (1, 4, 8, 32):
                queues = [f"{{emails}}:queue-{i}" for i in range(n)]
                points = [point(rng, t0 + i * args.interval * 1000, args.interval, queues)
                          for i in range(day)]
                used = fill(r, f"h{n}", [pt.fields() for pt in points], day)
                print(f"| history, {n} queue(s) | {day} | {used / 1e6:.2f} MB | "
                      f"{used / day:.0f} B | {used / 1e6:.2f} MB |")
            entries = [decision(rng, t0 + i * 60_000) for i in range(1000)]
            used = fill(r, "d", [e.fields() for e in entries], 1000)
            print(f"| decisions | 1000 | {used / 1e6:.2f} MB | {used / 1000:.0f} B | - |")
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
