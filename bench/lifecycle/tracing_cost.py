"""Worker tasks/s with tracing off and on (spec.worker.tracing), side by side, and the start-up
import cost of the otel extra.

One real `taskqueue-worker` process (no-op handler, concurrency 1, prefetch 20) drains N
enveloped tasks from a private redis-server; with tracing on its spans go over OTLP/HTTP to a
local receiver that accepts and drops them (the exporter's work is real, the network is
loopback). Each round runs every mode once, in an order that reverses every round (A B, B A, ...)
so no mode always runs first. Two figures per run: wall tasks/s, and the worker process's CPU
time per task (user + system of all its threads, from /proc, between its first and its last
completed task: start-up excluded). On a machine loaded by other processes the wall rate moves
with the load; the CPU time per task moves much less, so a difference between two workers shows
there first. `--baseline DIR` runs another checkout's `operator/` (e.g. `git archive` of main)
as the mode "baseline", tracing off; the per-round ratio to it is printed.

    python bench/lifecycle/tracing_cost.py --tasks 20000 --rounds 3
    python bench/lifecycle/tracing_cost.py --tasks 20000 --rounds 8 --modes off \
        --baseline /tmp/base/operator

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT)]

from tests.fixtures.redis_server import RedisServer  # noqa: E402
from tests.redis.worker.procs import worker_argv  # noqa: E402

from taskqueue import client  # noqa: E402


class Drop(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@dataclass(frozen=True)
class Drained:
    rate: float
    """Tasks/s from the worker's start to its last task."""
    cpu_us: float
    """The worker process's CPU µs per task, from its first to its last completed task."""


TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads) so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def drain(url: str, n: int, tracing: str | None, endpoint: str, pythonpath: str = "") -> Drained:
    r = redis.Redis.from_url(url)
    r.flushall()
    for start in range(0, n, 5000):
        client.enqueue_many_sync(r, "q", ["x"] * min(5000, n - start))
    env = {**os.environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": endpoint,
           "PYTHONPATH": os.pathsep.join(filter(None, [pythonpath, str(ROOT)]))}
    args = ["--redis-url", url, "--queue", "q", "--handler", "taskqueue.worker.builtin:noop",
            "--prefetch", "20"] + (["--tracing", tracing] if tracing else [])
    t0 = time.perf_counter()
    proc = subprocess.Popen(worker_argv(*args), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        first: tuple[int, float] | None = None
        while (done := int(r.hget("q:stats", "completed") or 0)) < n:
            if first is None and done > 0:
                first = (done, cpu_seconds(proc.pid))
            time.sleep(0.01)
        rate = n / (time.perf_counter() - t0)
        first_done, first_cpu = first or (0, 0.0)
        cpu_us = 1e6 * (cpu_seconds(proc.pid) - first_cpu) / max(1, n - first_done)
        return Drained(rate=rate, cpu_us=cpu_us)
    finally:
        proc.terminate()
        proc.wait(30)


def importtime(code: str) -> float:
    """Milliseconds to run `code` in a fresh interpreter (median of 5)."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        runs.append(1000 * (time.perf_counter() - t0))
    return statistics.median(runs)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=20000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default="off,parent,link")
    p.add_argument("--baseline", default="",
                   help="another checkout's operator/ dir: its worker runs as 'baseline'")
    args = p.parse_args()
    print(f"load average: {os.getloadavg()}")
    server = RedisServer(data_dir=Path(tempfile.mkdtemp()))
    server.start()
    http = ThreadingHTTPServer(("127.0.0.1", 0), Drop)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{http.server_address[1]}/v1/traces"
    modes = args.modes.split(",") + (["baseline"] if args.baseline else [])
    runs: dict[str, list[Drained]] = {m: [] for m in modes}
    try:
        for round_ in range(args.rounds):
            for mode in modes if round_ % 2 == 0 else modes[::-1]:
                tracing = None if mode in ("off", "baseline") else mode
                path = args.baseline if mode == "baseline" else ""
                runs[mode].append(drain(server.url, args.tasks, tracing, endpoint, path))
    finally:
        server.stop()
        http.shutdown()
    for mode, got in runs.items():
        print(f"tracing {mode}: {statistics.median(d.rate for d in got):.0f} tasks/s "
              f"(rounds: {', '.join(f'{d.rate:.0f}' for d in got)}); "
              f"{statistics.median(d.cpu_us for d in got):.0f} µs CPU/task "
              f"(rounds: {', '.join(f'{d.cpu_us:.0f}' for d in got)})")
    if args.baseline:
        for mode in args.modes.split(","):
            pairs = list(zip(runs[mode], runs["baseline"], strict=True))
            rate = [a.rate / b.rate for a, b in pairs]
            cpu = [a.cpu_us / b.cpu_us for a, b in pairs]
            print(f"{mode} / baseline, per round: tasks/s {', '.join(f'{x:.3f}' for x in rate)}"
                  f" (median {statistics.median(rate):.3f}); CPU/task "
                  f"{', '.join(f'{x:.3f}' for x in cpu)} (median {statistics.median(cpu):.3f})")
    base = importtime("import taskqueue.worker.command")
    traced = importtime("import taskqueue.worker.command, taskqueue.worker.tracing")
    print(f"worker import: {base:.0f} ms without tracing, {traced:.0f} ms with the otel "
          "modules")
    print(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
