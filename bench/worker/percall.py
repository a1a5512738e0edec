"""Deterministic cost per task of the worker, for before/after on a loaded machine: Redis
commands per task (INFO commandstats; commands run by a script's redis.call are counted too,
under their own name) and, with --profile, Python calls per task in each worker thread.

One `taskqueue-worker` (bench.py's child: AtLeastOnce, prefetch 1, concurrency C, a no-op sync
or async handler) drains N raw tasks, as bench_bullmq.py runs it (`--envelopes`: tasks as the
client enqueues them, with an id, as tracing_cost.py runs it). The counters are reset after
the worker registered and settled and read when the last task completed; then the same worker
idles for as long and that window's counts (the periodic threads: heartbeat, lifecycle, flow,
promoter...) are printed apart and subtracted, so what is left is what the tasks cost.

    python bench/worker/percall.py --base-root /work/wt/base30 --tasks 20000
    python bench/worker/percall.py --base-root /work/wt/base30 --tasks 5000 --profile
    python bench/worker/percall.py --base-root /work/wt/base30 --tasks 5000 --envelopes

Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE)]

from bench import env, push, stop_children, wait_until  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402

from taskqueue.wire import keys  # noqa: E402

QUEUE = "bq"
PROFILE_HOOK = HERE / "percall_profile.py"


def commands(r: redis.Redis) -> dict[str, int]:
    """calls per command since the last CONFIG RESETSTAT (INFO and CONFIG left out)."""
    stats = r.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()
            if name not in ("cmdstat_info", "cmdstat_config")}


def push_envelopes(r: redis.Redis, n: int) -> None:
    """n tasks as the client enqueues them (envelopes with an id), in batches."""
    for start in range(0, n, 10000):
        r.lpush(QUEUE, *[keys.wrap(f"t{i}", task_id=f"id{i}")
                         for i in range(start, min(n, start + 10000))])


def run(url: str, r: redis.Redis, *, root: Path, handler: str, conc: int, n: int,
        profile: Path | None, envelopes: bool, prefetch: int = 1,
        ) -> tuple[dict[str, int], dict[str, int], float]:
    """(commands while draining, commands idling as long, seconds drained)."""
    r.flushall()
    argv = [sys.executable, str(root / "bench" / "worker" / "bench.py"), "--child", "ours",
            "--url", url, "--delivery", "AtLeastOnce", "--prefetch", str(prefetch), "--concurrency",
            str(conc), "--handler", handler, "0"]
    paths = [str(root / "bench" / "worker"), str(root / "operator"), str(root)]
    child_env = {**env(url), "PYTHONPATH": os.pathsep.join(paths)}
    if profile is not None:  # the hook profiles every thread from the first task on
        argv = [sys.executable, str(PROFILE_HOOK), str(profile), *argv[1:]]
        child_env |= {"PERCALL_DONE_KEY": f"{QUEUE}:stats", "PERCALL_TASKS": str(n)}
    child = subprocess.Popen(argv, env=child_env, cwd=root, stdout=subprocess.DEVNULL,
                             stderr=None)
    try:
        wait_until(lambda: r.zcard(f"{QUEUE}:workers") >= 1, timeout=60, every=0.05)
        time.sleep(1.5)
        r.config_resetstat()
        t0 = time.perf_counter()
        if envelopes:
            push_envelopes(r, n)
        else:
            push(r, QUEUE, n)
        wait_until(lambda: int(r.hget(f"{QUEUE}:stats", "completed") or 0) >= n,
                   every=0.002)
        elapsed = time.perf_counter() - t0
        busy = commands(r)
        r.config_resetstat()
        time.sleep(elapsed)
        idle = commands(r)
    finally:
        if profile is not None:
            wait_until(lambda: profile.with_suffix(".txt").exists(), timeout=60, every=0.05)
        stop_children([child])
    return busy, idle, elapsed


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=20000)
    p.add_argument("--base-root", type=Path, help="a checkout to compare with (before)")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--prefetch", type=int, default=1)
    p.add_argument("--envelopes", action="store_true",
                   help="enqueue envelopes with ids (as the client does), not raw payloads")
    p.add_argument("--keep", help="with --profile: write the .txt/.tsv profiles into this dir")
    p.add_argument("--profile", action="store_true",
                   help="also Python calls per task per thread (cProfile; slows the worker)")
    a = p.parse_args()
    roots = ([("base", a.base_root)] if a.base_root else []) + [("this", ROOT)]
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = a.keep or tmp_dir
        server = RedisServer(Path(tmp))
        server.start()
        try:
            r = redis.Redis.from_url(server.url)
            for kind, handler in (("sync", "bench_tasks:noop"), ("async", "bench_tasks:anoop")):
                for name, root in roots:
                    prof = Path(tmp) / f"{name}-{kind}" if a.profile else None
                    busy, idle, elapsed = run(server.url, r, root=root, handler=handler,
                                              conc=a.concurrency, n=a.tasks, profile=prof,
                                              envelopes=a.envelopes, prefetch=a.prefetch)
                    label = f"{name} c={a.concurrency} prefetch={a.prefetch} {kind}"
                    report(label, busy, idle, elapsed, a.tasks)
                    if prof is not None:
                        print((prof.with_suffix(".txt")).read_text(), flush=True)
        finally:
            server.stop()


def report(label: str, busy: dict[str, int], idle: dict[str, int], elapsed: float,
           n: int) -> None:
    names = sorted(set(busy) | set(idle), key=lambda k: -busy.get(k, 0))
    net = {k: busy.get(k, 0) - idle.get(k, 0) for k in names}
    total = sum(v for v in net.values())
    print(f"== {label}: {n} tasks in {elapsed:.2f} s; Redis commands per task (drain minus "
          f"an idle window as long): {total / n:.3f}", flush=True)
    for k in names:
        print(f"   {k:16s} {net[k] / n:8.4f}/task   (drain {busy.get(k, 0)}, "
              f"idle {idle.get(k, 0)})", flush=True)


if __name__ == "__main__":
    main()
