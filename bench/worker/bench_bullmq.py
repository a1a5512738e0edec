"""Our worker against BullMQ, side by side in one run: no-op tasks, N pre-filled, one Redis.

For each (processes, concurrency) pair, each contender runs once, alternating, and reports
tasks/s, Redis CPU per task (INFO cpu used_cpu_sys + used_cpu_user, delta over the timed window
/ tasks) and client CPU per task (utime + stime of the worker processes from /proc, same window).

    python bench/worker/bench_bullmq.py        # 30,000 tasks; pairs 1x1, 1x8, 1x50, 4x8, 4x50
    python bench/worker/bench_bullmq.py --pairs 1x8 4x50 --tasks 30000 --rounds 2

- taskqueue-worker: AtLeastOnce, prefetch 1, `concurrency` slots per process (bench.py's child),
  once with a sync no-op handler (thread slots) and once with an `async def` no-op (slots on
  the event loop).
  The processes start and register first, then the N tasks are LPUSHed (3 commands) and the
  timer runs until `<prefix>:stats completed` reaches N.
- BullMQ (bench/worker/bullmq/, `npm ci` there, run by the
  script when node_modules is missing; versions in its package-lock.json): N jobs
  are added first (addBulk, removeOnComplete), the worker processes connect with
  `autorun: false`, print "ready", and get SIGUSR1 to start; the timer runs from the signal
  until the wait and active lists are empty.

Also: launch-to-first-task of one `taskqueue-worker` process (a task already queued) and its RSS
after N tasks, beside BullMQ's launch-to-first-job. Two ways to start ours: as a worker pod
starts (`pod`: the env the operator gives it, TASKQUEUE_WORKER_SETTINGS and TASKQUEUE_MANIFEST,
no flags), and by hand with flags (`flags`: the spec is validated with pydantic). A `--base-root`
checkout gets the same env (an older worker ignores the settings and reads the manifest).
A private redis-server (appendonly off) on a free port is started and stopped by the script.
"""

from __future__ import annotations

import argparse
import os
import shutil
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

from bench import env, push, stop_children, wait_until  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402

BULL = HERE / "bullmq"
QUEUE = "bq"
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of the processes `pids` (and their reaped children: none here)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def redis_cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def timed(r: redis.Redis, pids: list[int], n: int, start: Callable[[], None],
          done: Callable[[], bool]) -> tuple[float, float, float]:
    """tasks/s, Redis CPU µs/task, client CPU µs/task over start() .. done()."""
    cpu0, rcpu0, t0 = cpu_seconds(pids), redis_cpu(r), time.perf_counter()
    start()
    wait_until(done, timeout=600, every=0.002)
    elapsed = time.perf_counter() - t0
    cpu1, rcpu1 = cpu_seconds(pids), redis_cpu(r)
    return n / elapsed, (rcpu1 - rcpu0) * 1e6 / n, (cpu1 - cpu0) * 1e6 / n


def run_ours(url: str, r: redis.Redis, procs: int, conc: int, n: int, *,
             handler: str = "bench_tasks:noop", root: Path = ROOT) -> tuple[float, ...]:
    """`root`: a checkout to take the worker from (another commit, for before/after)."""
    r.flushall()
    argv = [sys.executable, str(root / "bench" / "worker" / "bench.py"), "--child", "ours",
            "--url", url, "--delivery", "AtLeastOnce", "--prefetch", "1", "--concurrency",
            str(conc)]
    if handler != "bench_tasks:noop":
        argv += ["--handler", handler]
    child_env = {**env(url), "PYTHONPATH": os.pathsep.join(
        [str(root / "bench" / "worker"), str(root / "operator"), str(root)])}
    children = [subprocess.Popen([*argv, str(i)], env=child_env, cwd=root,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for i in range(procs)]
    try:
        wait_until(lambda: r.zcard(f"{QUEUE}:workers") >= procs, timeout=60, every=0.05)
        time.sleep(1.5)
        return timed(r, [c.pid for c in children], n, lambda: push(r, QUEUE, n),
                     lambda: int(r.hget(f"{QUEUE}:stats", "completed") or 0) >= n)
    finally:
        stop_children(children)


def node() -> str:
    exe = shutil.which("node")
    if exe is None:
        raise RuntimeError("node is not on PATH")
    return exe


def install_bullmq() -> None:
    """`npm ci` in bench/worker/bullmq (the versions of package-lock.json) unless done."""
    if not (BULL / "node_modules" / "bullmq").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=BULL, check=True)


def run_bullmq(url: str, r: redis.Redis, procs: int, conc: int, n: int) -> tuple[float, ...]:
    r.flushall()
    subprocess.run([node(), "fill.js", url, str(n)], cwd=BULL, check=True)
    children = [subprocess.Popen([node(), "worker.js", url, str(conc)], cwd=BULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                for _ in range(procs)]
    try:
        for c in children:
            assert c.stdout is not None
            if c.stdout.readline().strip() != b"ready":
                raise RuntimeError("a BullMQ worker did not start")
        time.sleep(1.5)

        def start() -> None:
            for c in children:
                c.send_signal(signal.SIGUSR1)

        def done() -> bool:
            return r.llen("bull:bq_bullmq:wait") + r.llen("bull:bq_bullmq:active") == 0
        return timed(r, [c.pid for c in children], n, start, done)
    finally:
        stop_children(children)


def pod_env(url: str, *, handler: str = "bench_first:stamp") -> dict[str, str]:
    """The literal env the operator gives a worker pod of a TaskQueue consuming QUEUE."""
    from tests.helpers.worker import pod_env as env_of

    from taskqueue.api import models

    tq = models.TaskQueue.model_validate({
        "apiVersion": models.API_VERSION, "kind": models.KIND,
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {"redis": {"url": url}, "queues": [{"key": QUEUE}],
                 "worker": {"handler": handler, "concurrency": 1}}})
    return env_of(tq)


def first_task_ours(url: str, r: redis.Redis, n: int, *, root: Path = ROOT,
                    how: str = "pod") -> tuple[float, float]:
    """ms from launching `python -m taskqueue.worker.main` (what the `taskqueue-worker` script
    runs) to its first task started (one task queued first), and its RSS in MiB after `n` more
    tasks. `root`: the checkout to take the worker from; `how`: "pod" (the operator's env) or
    "flags" (the settings as command-line flags)."""
    r.flushall()
    r.lpush(QUEUE, "first")
    # the handler module comes from this checkout for every contender (bench_first.py)
    child_env = {**env(url), "PYTHONPATH": os.pathsep.join(
        [str(root / "operator"), str(HERE), str(root)])}
    argv = [sys.executable, "-m", "taskqueue.worker.main"]
    if how == "pod":
        child_env.update(pod_env(url))
    else:
        argv += ["--redis-url", url, "--queue", QUEUE, "--handler", "bench_first:stamp",
                 "--concurrency", "1"]
    t0 = time.time()
    child = subprocess.Popen(argv, env=child_env, cwd=root, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: r.get("bench:first") is not None, timeout=60, every=0.001)
        launch = (float(r.get("bench:first") or 0) - t0) * 1000
        push(r, QUEUE, n)
        wait_until(lambda: int(r.hget(f"{QUEUE}:stats", "completed") or 0) >= n + 1,
                   timeout=600, every=0.01)
        rss = int(Path(f"/proc/{child.pid}/statm").read_text().split()[1])
        return launch, rss * os.sysconf("SC_PAGE_SIZE") / 2**20
    finally:
        stop_children([child])


def first_job_bullmq(url: str, r: redis.Redis) -> float:
    """ms from launching a BullMQ worker process (autorun) to its first job started."""
    r.flushall()
    subprocess.run([node(), "fill.js", url, "1"], cwd=BULL, check=True)
    t0 = time.time()
    child = subprocess.Popen([node(), "-e", (
        "const {Worker}=require('bullmq');const IORedis=require('ioredis');"
        "const c=new IORedis(process.argv[1],{maxRetriesPerRequest:null});"
        "const c2=new IORedis(process.argv[1]);"
        "new Worker('bq_bullmq',async()=>{await c2.set('bench:first',String(Date.now()/1000))},"
        "{connection:c});"), url], cwd=BULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: r.get("bench:first") is not None, timeout=60, every=0.001)
        return (float(r.get("bench:first") or 0) - t0) * 1000
    finally:
        child.kill()
        child.wait()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=30000)
    p.add_argument("--pairs", nargs="+", default=["1x1", "1x8", "1x50", "4x8:50", "4x50"],
                   help="PROCESSESxCONCURRENCY[:BULLMQ_CONCURRENCY] (default: the same)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--starts", type=int, default=5, help="launch-to-first-task samples")
    p.add_argument("--base-root", type=Path,
                   help="a checkout of another commit, run as one more contender (before/after;"
                        " e.g. git archive c64e4e4 | tar -x -C /tmp/base)")
    a = p.parse_args()
    install_bullmq()
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        try:
            report(a, server.url, redis.Redis.from_url(server.url))
        finally:
            server.stop()


def one_pair(a: argparse.Namespace, url: str, r: redis.Redis, rnd: int, pair: str,
             ratios: dict[tuple[int, str], list[tuple[float, ...]]]) -> None:
    """One PxC pair: every contender once, side by side; prints and keeps the ratios to
    BullMQ (tasks/s, Redis CPU per task) and the figures (tasks/s, client CPU per task)."""
    procs_s, _, rest = pair.partition("x")
    conc_s, _, bull_s = rest.partition(":")
    procs, conc = int(procs_s), int(conc_s)
    bull_conc = int(bull_s or conc_s)
    roots = [("taskqueue", ROOT)]
    if a.base_root:  # before/after: each handler kind run by the base, then by this checkout
        roots.insert(0, ("base", a.base_root))
    rows = [(f"{name} c={conc} {kind}",
             run_ours(url, r, procs, conc, a.tasks, handler=handler, root=root))
            for kind, handler in (("sync", "bench_tasks:noop"), ("async", "bench_tasks:anoop"))
            for name, root in roots]
    rows.append((f"bullmq c={bull_conc}", run_bullmq(url, r, procs, bull_conc, a.tasks)))
    bull = rows[-1][1]
    for name, (rate, rcpu, ccpu) in rows:
        ratios.setdefault((procs, name), []).append((rate / bull[0], rcpu / bull[1], rate,
                                                     ccpu))
        print(f"round={rnd} procs={procs} {name:22s} {rate:8.0f} tasks/s  redis "
              f"{rcpu:5.1f} us/task  client {ccpu:6.1f} us/task  vs bullmq: tasks/s "
              f"{rate / bull[0]:.2f}x redis cpu/task {rcpu / bull[1]:.2f}x", flush=True)


def starts(a: argparse.Namespace, url: str, r: redis.Redis) -> None:
    """Launch-to-first-task samples, contenders interleaved, then the medians."""
    launches: dict[str, list[float]] = {}
    rss: dict[str, list[float]] = {}
    for _ in range(a.starts):
        for name, root, how in (("taskqueue pod", ROOT, "pod"), ("taskqueue flags", ROOT, "flags"),
                                ("base pod", a.base_root, "pod"),
                                ("base flags", a.base_root, "flags")):
            if root is None:
                continue
            launch, mib = first_task_ours(url, r, 10000, root=root, how=how)
            launches.setdefault(name, []).append(launch)
            rss.setdefault(name, []).append(mib)
            print(f"start {name} launch-to-first-task {launch:6.0f} ms  "
                  f"RSS after 10,000 tasks {mib:5.1f} MiB", flush=True)
        launch = first_job_bullmq(url, r)
        launches.setdefault("bullmq", []).append(launch)
        print(f"start bullmq launch-to-first-job {launch:6.0f} ms", flush=True)
    if launches:
        bull = statistics.median(launches["bullmq"])
        for name, got in launches.items():
            memory = (f", RSS {statistics.median(rss[name]):.1f} MiB" if name in rss else "")
            print(f"median start {name}: {statistics.median(got):.0f} ms "
                  f"({statistics.median(got) / bull:.2f}x bullmq){memory}", flush=True)


def report(a: argparse.Namespace, url: str, r: redis.Redis) -> None:
    version = subprocess.run([node(), "-p", "require('bullmq/package.json').version"],
                             cwd=BULL, capture_output=True, text=True, check=True).stdout
    node_version = subprocess.run([node(), "--version"], capture_output=True, text=True,
                                  check=True).stdout.strip()
    print(f"# cpus={os.cpu_count()} redis={r.info()['redis_version']} bullmq={version.strip()} "
          f"node={node_version} load average={os.getloadavg()}", flush=True)
    ratios: dict[tuple[int, str], list[tuple[float, ...]]] = {}
    for rnd in range(a.rounds):
        for pair in a.pairs:
            one_pair(a, url, r, rnd, pair, ratios)
    if a.rounds > 1:
        for (procs, name), got in ratios.items():
            print(f"median of {len(got)} rounds procs={procs} {name:22s} "
                  f"{statistics.median(g[2] for g in got):8.0f} tasks/s  client "
                  f"{statistics.median(g[3] for g in got):6.1f} us/task  vs bullmq: tasks/s "
                  f"{statistics.median(g[0] for g in got):.2f}x redis cpu/task "
                  f"{statistics.median(g[1] for g in got):.2f}x", flush=True)
    starts(a, url, r)
    print(f"# load average at the end={os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
