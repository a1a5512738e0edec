"""The console at scale: every page's server time with 1,000,000 pending tasks and 100,000 dead
letters, and the Redis cost of the live refresh with many viewers.

    python bench/console/pages.py [--pending 1000000] [--dead 100000] [--viewers 20]
                                  [--workers 200] [--schedules 64]

Starts its own redis-server (random loopback port, no persistence) and `taskqueue console -f`
(a real process, --refresh 2) on a manifest with flow control on both queues and `schedules`
schedules, fills Redis (pipelined, outside the measurement): the queues and dead letters, the
history and decision log, the flow hashes, the schedules' firing record, and `workers`
registered workers each holding 4 tasks with a progress report (the one-TaskQueue page and
its live refresh show the first page of workers, `reads.WORKERS_PAGE`, the workers page the
others a page at a time). Then:
- each page is fetched 20 times; the time is the HTTP round trip on loopback (server time plus
  a few hundred microseconds of client), median and max;
- `viewers` clients poll one TaskQueue's data.json as its page's script does (every part and
  the first page of workers) every 0.5 s for 10 s; Redis's own commandstats count the observe
  calls (EVALSHA) and the reads of the held tasks (one LRANGE per shown worker) made
  meanwhile: one of each per refresh interval is the goal, whatever the number of viewers.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import redis

from taskqueue.console import reads
from taskqueue.wire import history, keys

LIVE = "/tq/bench/big/data.json?parts=queues,schedules,workers&workers=0"
"""What the TaskQueue page's script asks every refresh interval."""
PAGES = ["/", "/tq/bench/big", "/tq/bench/big/data.json", LIVE, "/tq/bench/big/queues",
         "/tq/bench/big/workers?page=3",
         "/tq/bench/big/dead", "/tq/bench/big/dead?page=3999",
         "/tq/bench/big/dead?q=needle-77"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listens on {port}")


def manifest(path: Path, *, port: int, schedules: int) -> None:
    path.write_text(json.dumps({
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": "big", "namespace": "bench"},
        "spec": {"redis": {"url": f"redis://127.0.0.1:{port}/0"},
                 "queues": [{"key": "big", "maxInFlight": 800,
                             "rateLimit": {"tasks": 500, "perSeconds": 1, "burst": 50}},
                            {"key": "bulk", "paused": True}],
                 "schedules": [{"name": f"s{i}", "cron": f"{i % 60} * * * *",
                                "timeZone": "Europe/Berlin", "queue": "bulk",
                                "payload": "report"} for i in range(schedules)]}}))


def fill_features(r: redis.Redis, *, workers: int, schedules: int) -> None:
    """What the operator, `taskqueue pause`, fire.lua and the workers write (their formats,
    docs/contracts.md): the flow hashes, the schedules' record, workers holding tasks with
    progress reports."""
    now = time.time()
    r.hset("big:flow", mapping={"rate:big": "500 1 50", "max:big": "800", "paused:bulk": "spec",
                                "paused-cli:big": f"{now:.0f} oncall"})
    r.hset("big:flowstate", mapping={"held:big": str(4 * workers), "tat:big": "0"})
    slot = int(now // 3600 * 3600 * 1000)
    for i in range(schedules):
        r.hset("big:schedules", mapping={f"through:s{i}": slot + 3_600_000,
                                         f"slot:s{i}": slot, f"id:s{i}": f"s{i}:slot",
                                         f"missed:s{i}": 0, f"skipped:s{i}": 0})
    pipe = r.pipeline(transaction=False)
    for w in range(workers):
        wid = f"big-worker-{w:03d}"
        pipe.zadd("big:workers", {wid: (now + 3600) * 1000})
        held = [keys.wrap(f"held-{w}-{j}", task_id=f"h-{w}-{j}", enqueued_at=now - 30)
                for j in range(4)]
        pipe.rpush(f"big:processing:{wid}", *[keys.Entry("big", "", e).encode() for e in held])
        pipe.hset(f"big:progress:{wid}", mapping={
            f"h-{w}-{j}": json.dumps({"fraction": j / 4, "message": f"step {j}", "at": now})
            for j in range(4)})
    pipe.execute()


def fill(r: redis.Redis, *, pending: int, dead: int) -> None:
    batch = 1000
    for queue, n in (("big", pending // 2), ("bulk", pending - pending // 2)):
        for start in range(0, n, batch):
            pipe = r.pipeline(transaction=False)
            pipe.lpush(queue, *[keys.wrap(f'{{"image": {i}, "size": "1024x768"}}',
                                          task_id=f"{queue}-{i}")
                                for i in range(start, min(n, start + batch))])
            pipe.execute()
    now = time.time()
    for start in range(0, dead, batch):
        r.lpush("big:dead", *[json.dumps({
            "queue": "big", "payload": f'{{"image": {i}}}', "attempts": 3,
            "error": f"needle-{i}" if i % 5000 == 77 else "TimeoutError: took over 30 s",
            "failed_at": now - i, "id": f"dead-{i}"})
            for i in range(start, min(dead, start + batch))])
    t = int(now * 1000)
    for i in range(360):
        p = history.HistoryPoint(t=t - (360 - i) * 10_000, dt=10_000, desired=5, replicas=5,
                                 ready=5, inflight=20, workers=5, completed=100,
                                 queues={"big": history.QueuePoint(backlog=pending // 2,
                                                                   arrived=100),
                                         "bulk": history.QueuePoint(backlog=pending // 2)})
        r.xadd("big:history", p.fields())
    for i in range(60):
        d = history.DecisionEntry(t=t - i * 60_000, previous=4, replicas=5, recommendation=5,
                                  rule="target-wait", reason="bench")
        r.xadd("big:decisions", d.fields())


def get(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as reply:
        reply.read()
    return (time.perf_counter() - start) * 1000


def calls(r: redis.Redis, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--dead", type=int, default=100_000)
    parser.add_argument("--viewers", type=int, default=20)
    parser.add_argument("--workers", type=int, default=200)
    parser.add_argument("--schedules", type=int, default=64)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="console-bench-"))
    rport, cport = free_port(), free_port()
    server = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port",
                               str(rport), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                               "no", "--dir", str(work)], stdout=subprocess.DEVNULL)
    console = None
    try:
        wait_port(rport)
        r = redis.Redis(port=rport)
        t0 = time.monotonic()
        fill(r, pending=args.pending, dead=args.dead)
        fill_features(r, workers=args.workers, schedules=args.schedules)
        manifest(work / "taskqueue.yaml", port=rport, schedules=args.schedules)
        print(f"filled {args.pending} pending, {args.dead} dead letters, {args.workers} workers "
              f"holding 4 tasks each with progress, {args.schedules} schedules in "
              f"{time.monotonic() - t0:.1f} s; redis used_memory "
              f"{r.info('memory')['used_memory_human']}")
        console = subprocess.Popen(
            [sys.executable, "-m", "taskqueue.cli.console", "console", "-f",
             str(work / "taskqueue.yaml"), "--port", str(cport), "--refresh", "2"],
            stderr=subprocess.DEVNULL)
        wait_port(cport)
        base = f"http://127.0.0.1:{cport}"
        pages = PAGES
        shown = urllib.request.urlopen(base + "/tq/bench/big", timeout=30).read().decode()
        per_page = min(args.workers, reads.WORKERS_PAGE)
        assert shown.count('class="held"') == 4 * per_page, "held tasks missing"
        assert shown.count("data-schedule=") == args.schedules, "schedules missing"
        print(f"load average {os.getloadavg()[0]:.2f} (2 cores, shared)")
        print(f"{'page':62} {'median ms':>10} {'max ms':>8}")
        for page in pages:
            get(base + page)
            times = []
            for _ in range(20):
                times.append(get(base + page))
                time.sleep(0.05)
            print(f"{page:62} {statistics.median(times):10.1f} {max(times):8.1f}")
        before, held_before = calls(r, "evalsha"), calls(r, "lrange")
        stop = time.monotonic() + 10

        def viewer() -> None:
            while time.monotonic() < stop:
                get(base + LIVE)
                time.sleep(0.5)

        threads = [threading.Thread(target=viewer) for _ in range(args.viewers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        observes = calls(r, "evalsha") - before
        held_reads = (calls(r, "lrange") - held_before) / max(1, per_page)
        print(f"{args.viewers} viewers polling data.json (every part, first page of workers) "
              f"every 0.5 s for 10 s: {observes} observe call(s), {held_reads:g} read(s) of "
              f"the {per_page} shown workers' held tasks (refresh 2 s: 5 or 6 of each "
              f"expected)")
        print(f"load average {os.getloadavg()[0]:.2f}")
    finally:
        if console is not None:
            console.terminate()
            console.wait()
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
