"""The console at scale: every page's server time with 1,000,000 pending tasks and 100,000 dead
letters, and the Redis cost of the live refresh with many viewers.

    python bench/console/pages.py [--pending 1000000] [--dead 100000] [--viewers 20]

Starts its own redis-server (random loopback port, no persistence) and `taskqueue console`
(a real process, --refresh 2), fills Redis (pipelined, outside the measurement), then:
- each page is fetched 20 times; the time is the HTTP round trip on loopback (server time plus
  a few hundred microseconds of client), median and max;
- `viewers` clients poll one TaskQueue's data.json every 0.5 s for 10 s; Redis's own
  commandstats count the observe calls (EVALSHA) made meanwhile: one per refresh interval is
  the goal, whatever the number of viewers.
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

from taskqueue.wire import history, keys

PAGES = ["/", "/tq/bench/big", "/tq/bench/big/data.json", "/tq/bench/big/queues",
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


def evalsha_calls(r: redis.Redis) -> int:
    return int(r.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pending", type=int, default=1_000_000)
    parser.add_argument("--dead", type=int, default=100_000)
    parser.add_argument("--viewers", type=int, default=20)
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
        print(f"filled {args.pending} pending, {args.dead} dead letters in "
              f"{time.monotonic() - t0:.1f} s; redis used_memory "
              f"{r.info('memory')['used_memory_human']}")
        console = subprocess.Popen(
            [sys.executable, "-m", "taskqueue.cli.console", "console", "--redis-url",
             f"redis://127.0.0.1:{rport}/0", "--queue", "big", "--queue", "bulk",
             "--port", str(cport), "--refresh", "2"], stderr=subprocess.DEVNULL)
        wait_port(cport)
        base = f"http://127.0.0.1:{cport}"
        # the local console names a flag target by its first queue key, namespace "local"
        pages = [p.replace("/tq/bench/", "/tq/local/") for p in PAGES]
        print(f"load average {os.getloadavg()[0]:.2f} (2 cores, shared)")
        print(f"{'page':40} {'median ms':>10} {'max ms':>8}")
        for page in pages:
            get(base + page)
            times = []
            for _ in range(20):
                times.append(get(base + page))
                time.sleep(0.05)
            print(f"{page:40} {statistics.median(times):10.1f} {max(times):8.1f}")
        before, stop = evalsha_calls(r), time.monotonic() + 10

        def viewer() -> None:
            while time.monotonic() < stop:
                get(base + "/tq/local/big/data.json")
                time.sleep(0.5)

        threads = [threading.Thread(target=viewer) for _ in range(args.viewers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        calls = evalsha_calls(r) - before
        print(f"{args.viewers} viewers polling data.json every 0.5 s for 10 s: {calls} observe "
              f"call(s) (refresh 2 s: 5 or 6 expected)")
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
