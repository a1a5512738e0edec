"""Redis commands per scheduled task of one real `taskqueue-worker`, for a before/after of the
promoter (`--root`: the checkout whose worker code runs).

    python bench/schedules/scheduled_cost.py [--root CHECKOUT --instants 30 --per 10]

`--instants` due instants 0.3 s apart with `--per` tasks each (enqueued with `at=`, the way the
operator fires a slot of several schedules into the delayed zset), one worker (concurrency 16,
the tests' `record` handler) on a private redis-server. Counters (INFO commandstats, commands
run by a script counted under their own name) are reset after the tasks are enqueued and read
when the last one is done; then the worker idles as long and that window is subtracted. Reports
commands per task and the round trips of the promotion and fetch path (EVALSHA, ZRANGE).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT)]

import redis  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402

from taskqueue import client as producer  # noqa: E402

SHOWN = ("evalsha", "zrange", "rpop", "client|tracking")


def calls(stats: dict[str, dict[str, int]], name: str) -> int:
    return int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, default=ROOT)
    p.add_argument("--instants", type=int, default=30)
    p.add_argument("--per", type=int, default=10)
    a = p.parse_args()
    n = a.instants * a.per
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp) / "redis")
        server.start()
        env = {**os.environ, "TASKQUEUE_TEST_REDIS_URL": server.url,
               "PYTHONPATH": os.pathsep.join([str(a.root / "operator"), str(a.root)])}
        worker = subprocess.Popen(
            [sys.executable, "-m", "taskqueue.worker.main", "--redis-url", server.url,
             "--queue", "cq", "--handler", "tests.helpers.handlers:record",
             "--concurrency", "16", "--worker-id", "c-0", "--log-level", "WARNING"],
            env=env, cwd=a.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            r = redis.Redis.from_url(server.url)
            while r.zcard("cq:workers") < 1:
                time.sleep(0.1)
            time.sleep(2)
            start = time.time() + 2
            for i in range(a.instants):
                for k in range(a.per):
                    producer.enqueue_sync(r, "cq", f"t{i}-{k}", at=start + i * 0.3)
            r.config_resetstat()
            while r.llen("test:done") < n:
                time.sleep(0.05)
            busy_seconds = time.time() - start + 2
            busy = r.info("commandstats")
            r.config_resetstat()
            time.sleep(busy_seconds)
            idle = r.info("commandstats")
        finally:
            worker.terminate()
            worker.wait(timeout=60)
            server.stop()
    names = sorted({k.removeprefix("cmdstat_") for k in (*busy, *idle)})
    total = sum(calls(busy, m) - calls(idle, m) for m in names)
    print(f"worker code: {a.root}")
    print(f"{n} tasks in {a.instants} instants of {a.per}: {total / n:.3f} Redis commands per "
          "task (run minus an idle window as long)")
    for m in SHOWN:
        print(f"   {m:16s} {(calls(busy, m) - calls(idle, m)) / n:.3f}/task "
              f"(run {calls(busy, m)}, idle {calls(idle, m)})")


if __name__ == "__main__":
    main()
