"""Lifecycle benchmark: how fast a cancel reaches a running task, and how fast `status` answers
with a deep queue.

- cancel: one real worker process per handler kind (sync, async, command) runs a task that
  waits for its cancel (`tests.helpers.handlers:until_cancelled` and friends); the bench
  enqueues one, waits for it to start, cancels it and measures until the handler saw the cancel
  (sync/async: the handler notes it; command: the stats' `cancelled` count moves). N cancels
  per kind; p50/p99/max.
- status: N tasks queued with `track=True` (pipelined), then `client.status` of random ids;
  p50/p99 of the call, and the Redis memory per tracked task.

    python bench/lifecycle/bench.py --cancels 100 --queued 1000000

A private redis-server on a free port; not part of the test suite.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT)]

from tests.fixtures.redis_server import RedisServer  # noqa: E402
from tests.helpers import handlers as h  # noqa: E402
from tests.redis.worker.procs import running  # noqa: E402

from taskqueue import client  # noqa: E402
from taskqueue.wire import keys  # noqa: E402

Q = "bench"
SCHEMA = keys.KeySchema(prefix=Q, queues=(keys.QueueRef(Q),), dead_letter=f"{Q}:dead")
KINDS = {
    "sync": ["--handler", "tests.helpers.handlers:until_cancelled"],
    "async": ["--handler", "tests.helpers.handlers:async_until_cancelled"],
    "command": ["--command", sys.executable, str(ROOT / "tests/helpers/until_cancelled_cmd.py")],
}


def wait(probe, timeout: float = 30.0, every: float = 0.0005):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(every)


def quantiles(ms: list[float]) -> str:
    ms = sorted(ms)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    return (f"n={len(ms)} p50={statistics.median(ms):.1f} ms p99={p99:.1f} ms "
            f"max={ms[-1]:.1f} ms")


def cancels(server: RedisServer, kind: str, n: int, log: Path) -> list[float]:
    r = redis.Redis.from_url(server.url, decode_responses=True)
    r.flushall()
    out = []
    import os
    os.environ[h.URL_ENV] = server.url
    with running(server.url, "--queue", Q, *KINDS[kind], log_path=log):
        for i in range(n):
            tid = client.enqueue_sync(r, Q, f"long{i}")
            wait(lambda tid=tid: r.lpos(h.STARTED, tid) is not None)
            time.sleep(0.02)  # the handler is past its start note
            t0 = time.perf_counter()
            client.cancel_sync(r, tid, key_prefix=Q)
            if kind == "command":
                wait(lambda i=i: int(r.hget(SCHEMA.stats, "cancelled") or 0) == i + 1)
            else:
                wait(lambda tid=tid: r.lpos(h.CANCELLED, tid) is not None)
            out.append(1000 * (time.perf_counter() - t0))
        wait(lambda: int(r.hget(SCHEMA.stats, "cancelled") or 0) == n)
        assert not int(r.hget(SCHEMA.stats, "retried") or 0)
    return out


def status(server: RedisServer, n: int, calls: int) -> tuple[list[float], float]:
    r = redis.Redis.from_url(server.url, decode_responses=True)
    r.flushall()
    before = int(r.info("memory")["used_memory"])
    ids: list[str] = []
    batch = 10_000
    for start in range(0, n, batch):
        pipe = r.pipeline(transaction=False)
        for _ in range(min(batch, n - start)):
            push = client.plan(Q, "x" * 20)
            client.push_sync(pipe, push)
            index, fields = client.track_index(push, key_prefix=Q)
            pipe.hset(index, items=fields)
            pipe.expire(index, 86400)
            ids.append(push.task_id)
        pipe.execute()
    queue_bytes = int(r.info("memory")["used_memory"]) - before
    r.delete(Q)
    per_task = (int(r.info("memory")["used_memory"]) - before) / n
    out = []
    for tid in random.sample(ids, calls):
        t0 = time.perf_counter()
        s = client.status_sync(r, tid, key_prefix=Q)
        out.append(1000 * (time.perf_counter() - t0))
        assert s.state == "queued"
    print(f"  queue + index: {queue_bytes / n:.0f} B per task; index alone {per_task:.0f} B")
    return out, per_task


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cancels", type=int, default=100)
    p.add_argument("--queued", type=int, default=1_000_000)
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--kinds", default="sync,async,command")
    args = p.parse_args()
    import os
    print(f"load average: {os.getloadavg()}")
    server = RedisServer(data_dir=Path(__import__("tempfile").mkdtemp()))
    server.start()
    try:
        for kind in filter(None, args.kinds.split(",")):
            ms = cancels(server, kind, args.cancels, Path(f"/tmp/bench-lifecycle-{kind}.log"))
            print(f"cancel {kind}: {quantiles(ms)}")
        if args.queued:
            ms, _ = status(server, args.queued, args.calls)
            print(f"status at {args.queued} queued: {quantiles(ms)}")
    finally:
        server.stop()
    print(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
