"""Worker benchmark: no-op tasks/s for 1 and 4 processes, side by side, plus idle pickup latency.

Contenders: our worker (AtLeastOnce with prefetch 1 and 20, AtMostOnce), a raw redis-py
LMOVE + LREM loop (the ceiling without a framework), and RQ, arq, Dramatiq and Celery when
importable by `--peers-python` (a venv with `pip install rq arq dramatiq celery`; they pin an
older redis-py, so keep them out of the project's environment).

    python bench/worker/bench.py                          # ours + raw + latency
    python bench/worker/bench.py --peers-python /tmp/benchenv/bin/python \
        --celery-python /tmp/benchenv-celery/bin/python

Celery goes in a venv of its own (`--celery-python`): kombu needs redis-py >= 6.1, arq < 6.

A private redis-server (appendonly off) on a free port is started and stopped by the script.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE)]

from tests.fixtures.redis_server import RedisServer  # noqa: E402

QUEUE = "bq"


def env(url: str) -> dict[str, str]:
    return {**os.environ, "BENCH_REDIS_URL": url,
            "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT / "operator"), str(ROOT)])}


def wait_until(pred: Callable[[], bool], *, timeout: float = 600, every: float = 0.002) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark did not finish")
        time.sleep(every)


def push(r: redis.Redis, key: str, n: int) -> None:
    for start in range(0, n, 10000):
        r.lpush(key, *[f"t{i}" for i in range(start, min(n, start + 10000))])


# -- children --------------------------------------------------------------------------------
def child_ours(url: str, n: int, delivery: str, prefetch: int, concurrency: int,
               handler: str = "bench_tasks:noop") -> None:
    from taskqueue.wire import keys
    from taskqueue.worker import handlers
    from taskqueue.worker.config import WorkerConfig
    from taskqueue.worker.runner import Worker
    config = WorkerConfig(
        redis_url=url, schema=keys.KeySchema(prefix=QUEUE, queues=(keys.QueueRef(QUEUE),),
                                             dead_letter=f"{QUEUE}:dead"),
        worker_id=f"bench-{n}", handler=handler, delivery=delivery,  # type: ignore[arg-type]
        prefetch=prefetch, concurrency=concurrency)
    worker = Worker(config, handler=handlers.load(handler=config.handler, command=None,
                                                  timeout=None))
    gc.freeze()  # as taskqueue-worker does after start-up
    worker.start()
    signal.sigwait({signal.SIGTERM})
    worker.stop()
    worker.join(grace=2)


def child_raw(url: str, n: int) -> None:
    r = redis.Redis.from_url(url)
    proc = f"{QUEUE}:raw:{n}"
    while True:
        v = r.lmove(QUEUE, proc, "RIGHT", "LEFT")
        if v is None:
            time.sleep(0.0005)
            continue
        r.lrem(proc, 1, v)


# -- throughput runs ---------------------------------------------------------------------------
def run_prestarted(url: str, argv: list[str], procs: int, n: int, *, python: str,
                   enqueue: Callable[[], None], done: Callable[[], bool],
                   ready: Callable[[], bool] = lambda: True) -> float:
    """Start `procs` consumers, let them settle, enqueue, time until `done()`. tasks/s."""
    children = [subprocess.Popen([python, *argv, str(i)], env=env(url), cwd=ROOT,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for i in range(procs)]
    try:
        wait_until(ready, timeout=60, every=0.05)
        time.sleep(1.5)
        t0 = time.perf_counter()
        enqueue()
        wait_until(done)
        return n / (time.perf_counter() - t0)
    finally:
        stop_children(children)


def stop_children(children: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM every worker process, then wait (SIGKILL after 20 s)."""
    for c in children:
        c.send_signal(signal.SIGTERM)
    for c in children:
        try:
            c.wait(timeout=20)
        except subprocess.TimeoutExpired:
            c.kill()


def bench_ours(url: str, r: redis.Redis, procs: int, n: int, delivery: str,
               prefetch: int, concurrency: int = 1) -> float:
    r.flushall()
    argv = [str(Path(__file__)), "--child", "ours", "--url", url, "--delivery", delivery,
            "--prefetch", str(prefetch), "--concurrency", str(concurrency)]
    if delivery == "AtLeastOnce":
        def done() -> bool:
            return int(r.hget(f"{QUEUE}:stats", "completed") or 0) >= n
    else:
        def done() -> bool:
            return r.llen(QUEUE) == 0
    return run_prestarted(url, argv, procs, n, python=sys.executable,
                          enqueue=lambda: push(r, QUEUE, n), done=done,
                          ready=lambda: r.zcard(f"{QUEUE}:workers") >= procs)


def bench_raw(url: str, r: redis.Redis, procs: int, n: int) -> float:
    r.flushall()
    argv = [str(Path(__file__)), "--child", "raw", "--url", url]

    def done() -> bool:
        return r.llen(QUEUE) == 0 and not any(r.llen(k) for k in r.keys(f"{QUEUE}:raw:*"))
    return run_prestarted(url, argv, procs, n, python=sys.executable,
                          enqueue=lambda: push(r, QUEUE, n), done=done)


def _timed_burst(cmd: list[str], url: str, procs: int) -> float:
    t0 = time.perf_counter()
    children = [subprocess.Popen(cmd, env=env(url), cwd=HERE, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for _ in range(procs)]
    for c in children:
        c.wait(timeout=900)
    return time.perf_counter() - t0


def bench_burst(url: str, r: redis.Redis, procs: int, n: int, *, python: str, kind: str) -> float:
    """RQ and arq in burst mode: (run time - start-up time of an empty burst) per task."""
    bindir = Path(python).parent
    if kind == "rq":
        cmd = [str(bindir / "rq"), "worker", "--burst", "-w", "rq.worker.SimpleWorker",
               "-u", url, "bq_rq"]
        enqueue = [python, "-c", (
            "import os,redis,rq,bench_tasks;q=rq.Queue('bq_rq',connection=redis.Redis.from_url("
            f"os.environ['BENCH_REDIS_URL']));q.enqueue_many([rq.Queue.prepare_data("
            f"bench_tasks.noop) for _ in range({n})])")]
    else:
        cmd = [str(bindir / "arq"), "bench_arq.ArqSettings"]
        enqueue = [python, "-c", (
            "import asyncio,os;from arq import create_pool;from arq.connections import "
            "RedisSettings\nasync def m():\n p=await create_pool(RedisSettings.from_dsn("
            "os.environ['BENCH_REDIS_URL']))\n for _ in range(" + str(n) + "): "
            "await p.enqueue_job('arq_noop')\nasyncio.run(m())")]
    r.flushall()
    startup = _timed_burst(cmd, url, procs)
    subprocess.run(enqueue, env=env(url), cwd=HERE, check=True)
    elapsed = _timed_burst(cmd, url, procs)
    if r.llen("bq_rq") or r.zcard("arq:queue"):
        raise RuntimeError(f"{kind} left tasks in the queue")
    return n / max(1e-6, elapsed - startup)


def bench_dramatiq(url: str, r: redis.Redis, procs: int, n: int, *, python: str) -> float:
    r.flushall()
    argv = ["-m", "dramatiq", "bench_dramatiq", "--processes", "1", "--threads", "1",
            "--queues", "bq_dramatiq"]
    send = [python, "-c", f"import bench_dramatiq as b\nfor _ in range({n}): b.noop.send()"]

    def done() -> bool:
        return r.hlen("dramatiq:bq_dramatiq.msgs") == 0 and r.llen("dramatiq:bq_dramatiq") == 0
    return _prestarted_foreign(url, argv, procs, n, python=python, send=send, done=done)


def bench_celery(url: str, r: redis.Redis, procs: int, n: int, *, python: str) -> float:
    r.flushall()
    argv = ["-m", "celery", "-A", "bench_celery", "worker", "--pool", "solo", "-Q", "bq_celery",
            "--without-heartbeat", "--without-mingle", "--without-gossip", "-l", "warning",
            "-n"]
    send = [python, "-c", f"import bench_celery as b\nfor _ in range({n}): b.noop.delay()"]

    def done() -> bool:
        return r.llen("bq_celery") == 0 and r.hlen("unacked") == 0
    return _prestarted_foreign(url, argv, procs, n, python=python, send=send, done=done)


def _prestarted_foreign(url: str, argv: list[str], procs: int, n: int, *, python: str,
                        send: list[str], done: Callable[[], bool]) -> float:
    """Enqueue first (timed apart), then start workers and time until drained minus start-up
    (measured with an empty queue until the first task is taken)."""
    def argv_i(i: int) -> list[str]:
        return [*argv, f"w{i}@bench"] if argv[1] == "celery" else argv
    subprocess.run(send, env=env(url), cwd=HERE, check=True)
    t0 = time.perf_counter()
    children = [subprocess.Popen([python, *argv_i(i)], env=env(url), cwd=HERE,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for i in range(procs)]
    try:
        wait_until(done, timeout=900)
        return n / (time.perf_counter() - t0)
    finally:
        stop_children(children)


# -- latency -----------------------------------------------------------------------------------
def bench_latency(url: str, r: redis.Redis, *, delivery: str, queues: list[tuple[str, str]],
                  samples: int) -> dict[str, tuple[float, float]]:
    """Idle pickup latency per queue: p50, p99 in ms (enqueue -> handler start)."""
    from taskqueue import client
    r.flushall()
    spec = ",".join(f"{k}:{t}" for k, t in queues)
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__)), "--child", "latency", "--url", url, "--delivery",
         delivery, "--queues", spec, "0"], env=env(url), cwd=ROOT,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: r.zcard("lq:workers") >= 1, timeout=30, every=0.05)
        time.sleep(1.0)
        for i in range(samples):
            key, kind = queues[i % len(queues)]
            client.enqueue_sync(r, key, "x", priority=0 if kind == "zset" else None)
            time.sleep(0.02)
        wait_until(lambda: sum(r.llen(f"lat:{k}") for k, _ in queues) >= samples, timeout=30)
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=20)
    out = {}
    pooled: list[float] = []
    for key, _ in queues:
        values = sorted(float(x) * 1000 for x in r.lrange(f"lat:{key}", 0, -1))
        pooled += values
        out[key] = (statistics.median(values), values[min(len(values) - 1,
                                                          int(len(values) * 0.99))])
    pooled.sort()
    out["(all)"] = (statistics.median(pooled), pooled[min(len(pooled) - 1,
                                                         int(len(pooled) * 0.99))])
    return out


def child_latency(url: str, delivery: str, queues: str) -> None:
    from taskqueue.wire import keys
    from taskqueue.worker import handlers
    from taskqueue.worker.config import WorkerConfig
    from taskqueue.worker.runner import Worker
    refs = tuple(keys.QueueRef(k, t) for k, t in (q.split(":") for q in queues.split(",")))  # type: ignore[arg-type]
    config = WorkerConfig(
        redis_url=url, schema=keys.KeySchema(prefix="lq", queues=refs, dead_letter="lq:dead"),
        worker_id="lat", handler="bench_tasks:latency", delivery=delivery)  # type: ignore[arg-type]
    worker = Worker(config, handler=handlers.load(handler=config.handler, command=None,
                                                  timeout=None))
    gc.freeze()  # as taskqueue-worker does after start-up
    worker.start()
    signal.sigwait({signal.SIGTERM})
    worker.stop()
    worker.join(grace=2)


def _ratios(rows: list[tuple[str, int, float]]) -> None:
    """Our AtLeastOnce rates over RQ's and over the raw loop's, per process count."""
    rate = {(name, procs): r for name, procs, r in rows}
    for procs in sorted({p for _, p, _ in rows}):
        for ours in ("taskqueue AtLeastOnce prefetch=1", "taskqueue AtLeastOnce prefetch=20"):
            if (ours, procs) not in rate:
                continue
            parts = [f"{other.split()[0]} {rate[ours, procs] / rate[other, procs]:.1f}x"
                     for other in ("raw redis-py LMOVE+LREM loop", "RQ SimpleWorker", "arq",
                                   "Dramatiq (1 thread)", "Celery (solo pool)")
                     if (other, procs) in rate]
            if not parts:  # nothing to compare with (no peers, or --only)
                continue
            print(f"ratio {ours:34s} procs={procs}  vs " + ", ".join(parts), flush=True)


# -- main --------------------------------------------------------------------------------------
def peers_available(python: str | None, celery_python: str | None = None) -> list[str]:
    found = []
    for mod in ("rq", "arq", "dramatiq", "celery"):
        py = (celery_python or python) if mod == "celery" else python
        if py and subprocess.run([py, "-c", f"import {mod}"],
                                 capture_output=True).returncode == 0:
            found.append(mod)
    return found


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--child")
    p.add_argument("--url")
    p.add_argument("--delivery", default="AtLeastOnce")
    p.add_argument("--prefetch", type=int, default=1)
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--handler", default="bench_tasks:noop", help="child ours: the handler")
    p.add_argument("--queues", default="")
    p.add_argument("--tasks", type=int, default=30000)
    p.add_argument("--peer-tasks", type=int, default=3000)
    p.add_argument("--samples", type=int, default=600)
    p.add_argument("--procs", type=int, nargs="+", default=[1, 4])
    p.add_argument("--peers-python", help="python of a venv with rq, arq, dramatiq")
    p.add_argument("--celery-python", help="python of a venv with celery (default: peers')")
    p.add_argument("--latency-only", action="store_true", help="only the idle pickup latency")
    p.add_argument("--latency-modes", default="0,1,2",
                   help="which latency runs, by index: 0 AtLeastOnce, 1 BRPOP, 2 AtMostOnce script")
    p.add_argument("--only", default="",
                   help="run only the throughput contenders whose name contains this")
    p.add_argument("n", nargs="?", type=int, default=0)
    a = p.parse_args()
    if a.child == "ours":
        return child_ours(a.url, a.n, a.delivery, a.prefetch, a.concurrency, a.handler)
    if a.child == "raw":
        return child_raw(a.url, a.n)
    if a.child == "latency":
        return child_latency(a.url, a.delivery, a.queues)
    run_all(a)


def run_all(a: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        try:
            _report(a, server.url, redis.Redis.from_url(server.url))
        finally:
            server.stop()


def _contenders(a: argparse.Namespace, url: str, r: redis.Redis, procs: int,
                peers: list[str]) -> list[tuple[str, Callable[[], float]]]:
    ours = functools.partial(bench_ours, url, r, procs, a.tasks)
    peer = {"url": url, "r": r, "procs": procs, "n": a.peer_tasks,
            "python": a.peers_python or ""}
    out: list[tuple[str, Callable[[], float]]] = [
        ("taskqueue AtLeastOnce prefetch=1", functools.partial(ours, "AtLeastOnce", 1)),
        ("taskqueue AtLeastOnce prefetch=20", functools.partial(ours, "AtLeastOnce", 20)),
        ("taskqueue AtMostOnce (BRPOP)", functools.partial(ours, "AtMostOnce", 1)),
        ("raw redis-py LMOVE+LREM loop", functools.partial(bench_raw, url, r, procs, a.tasks)),
    ]
    if "rq" in peers:
        out.append(("RQ SimpleWorker", functools.partial(bench_burst, kind="rq", **peer)))
    if "arq" in peers:
        out.append(("arq", functools.partial(bench_burst, kind="arq", **peer)))
    if "dramatiq" in peers:
        out.append(("Dramatiq (1 thread)", functools.partial(bench_dramatiq, **peer)))
    if "celery" in peers:
        celery_peer = {**peer, "python": a.celery_python or a.peers_python or ""}
        out.append(("Celery (solo pool)", functools.partial(bench_celery, **celery_peer)))
    return out


def _report(a: argparse.Namespace, url: str, r: redis.Redis) -> None:
    print(f"# cpus={os.cpu_count()} redis={r.info()['redis_version']} appendonly=no "
          f"load average (1/5/15 min)={os.getloadavg()}", flush=True)
    rows: list[tuple[str, int, float]] = []
    peers = peers_available(a.peers_python, a.celery_python)
    for procs in [] if a.latency_only else a.procs:
        contenders = [c for c in _contenders(a, url, r, procs, peers) if a.only in c[0]]
        for name, fn in contenders:
            try:
                rate = fn()
            except (subprocess.CalledProcessError, RuntimeError, TimeoutError) as exc:
                print(f"{name:40s} procs={procs}  failed: {exc}", flush=True)
                continue
            rows.append((name, procs, rate))
            print(f"{name:40s} procs={procs}  {rate:10.0f} tasks/s", flush=True)
    _ratios(rows)
    runs = (("AtLeastOnce", [("vip", "list"), ("normal", "list"), ("z", "zset")]),
            ("AtMostOnce", [("vip", "list"), ("normal", "list")]),
            ("AtMostOnce", [("vip", "list"), ("z", "zset")]))
    for i, (delivery, queues) in enumerate(runs):
        if str(i) not in a.latency_modes.split(","):
            continue
        lat = bench_latency(url, r, delivery=delivery, queues=queues, samples=a.samples)
        for key, (p50, p99) in lat.items():
            print(f"latency {delivery:12s} {'+'.join(k for k, _ in queues):14s} queue={key:7s}"
                  f" p50={p50:6.2f} ms p99={p99:6.2f} ms", flush=True)
    print(f"# load average at the end={os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
