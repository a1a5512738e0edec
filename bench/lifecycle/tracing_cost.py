"""Worker tasks/s with tracing off and on (spec.worker.tracing), side by side, and the start-up
import cost of the otel extra.

One real `taskqueue-worker` process (no-op handler, concurrency 1, prefetch 20) drains N
enveloped tasks from a private redis-server; with tracing on its spans go over OTLP/HTTP to a
local receiver that accepts and drops them (the exporter's work is real, the network is
loopback). Rounds alternate off/on; the median of each is printed.

    python bench/lifecycle/tracing_cost.py --tasks 20000 --rounds 3

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


def drain(url: str, n: int, tracing: str | None, endpoint: str, pythonpath: str = "") -> float:
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
        while int(r.hget("q:stats", "completed") or 0) < n:
            time.sleep(0.01)
        return n / (time.perf_counter() - t0)
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
    rates: dict[str, list[float]] = {m: [] for m in args.modes.split(",")}
    if args.baseline:
        rates["baseline"] = []
    try:
        for _ in range(args.rounds):
            for mode in rates:
                tracing = None if mode in ("off", "baseline") else mode
                path = args.baseline if mode == "baseline" else ""
                rates[mode].append(drain(server.url, args.tasks, tracing, endpoint, path))
    finally:
        server.stop()
        http.shutdown()
    for mode, got in rates.items():
        print(f"tracing {mode}: {statistics.median(got):.0f} tasks/s "
              f"(rounds: {', '.join(f'{x:.0f}' for x in got)})")
    base = importtime("import taskqueue.worker.command")
    traced = importtime("import taskqueue.worker.command, taskqueue.worker.tracing")
    print(f"worker import: {base:.0f} ms without tracing, {traced:.0f} ms with the otel "
          "modules")
    print(f"load average: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
