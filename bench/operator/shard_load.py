"""Sharded operator load on a real control plane: N TaskQueues, 1 then 2 (then ...) replicas.

One control plane (scripts/control-plane: etcd + kube-apiserver + controller-manager without its
deployment and replicaset controllers, so the operator's Deployments get no ReplicaSets or
Pending pods; nothing the operator does at steady state changes) and one redis-server; N
TaskQueues created once (a third with a backlog). For each replica count R in `--replicas`, R
`taskqueue-operator --sharding` processes run side by side (the same command the chart runs with
`sharding.enabled`); once every TaskQueue has been polled and `--settle` seconds have passed it
measures over `--seconds`:

- polls per second over all replicas (from each one's `taskqueue_poll_duration_seconds_count`)
  against N / interval: below it, the operators fall behind (the effective poll period is
  N x window / polls);
- operator CPU (utime + stime from /proc, each replica and the sum, in cores), the CPU per poll
  (all replicas' CPU over all their polls) and the largest RSS of each replica;
- the poll lag (`taskqueue_poll_lag_seconds`, how late each poll started after it was due),
  summed over the replicas' histograms in the window: p50/p99 as bucket upper bounds, and the
  mean;
- the API requests per poll by verb and resource (`apiserver_request_total`: status PATCHes,
  Events; the controller-manager is idle here);
- the split (`taskqueue_owned_taskqueues` of each replica) and the API server's CPU.

    python bench/operator/shard_load.py --taskqueues 1000 --interval 5 --replicas 1 2

`--baseline DIR`: each replica count runs twice, first the operator package found in DIR (e.g.
`/work/main/operator`, on PYTHONPATH) then this tree's, on the same TaskQueues: an A/B in one
invocation.

`--py-spy DIR`: each replica is also sampled by py-spy (when installed; not a project
dependency) over the window, its folded stacks written to DIR/<replica>.folded (read them with
`bench/operator/folded.py`).

Not part of the tests.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import redis
import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "devcluster"))

from bench.operator.poll_load_cluster import (  # noqa: E402
    apiserver_requests,
    cpu_seconds,
    lag_buckets,
    quantile_bound,
    rss_mib,
)
from tests.fixtures.redis_server import RedisServer, free_port  # noqa: E402
from tests.helpers.kube import taskqueue  # noqa: E402

from taskqueue_devcluster import ControlPlane  # noqa: E402
from taskqueue_devcluster.controlplane import DEFAULT_CONTROLLERS, CommandError  # noqa: E402

POLLS = re.compile(r"^taskqueue_poll_duration_seconds_count\{[^}]*\} (\S+)$", re.M)
OWNED = re.compile(r"^taskqueue_owned_taskqueues\{[^}]*\} (\S+)$", re.M)




def scrape(port: int) -> tuple[float, int, float]:
    """(polls so far, TaskQueues polled at least once, TaskQueues owned) of one replica."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    counts = [float(v) for v in POLLS.findall(text)]
    owned = [float(v) for v in OWNED.findall(text)]
    return sum(counts), sum(1 for v in counts if v > 0), owned[0] if owned else 0.0


Lag = tuple[dict[float, float], float, float]


def lag_line(before: list[Lag], after: list[Lag], interval: float) -> str:
    """The poll lag over the window, all replicas' histograms summed."""
    def summed(each: list[Lag]) -> Lag:
        buckets: dict[float, float] = {}
        for b, _, _ in each:
            for le, v in b.items():
                buckets[le] = buckets.get(le, 0.0) + v
        return buckets, sum(x[1] for x in each), sum(x[2] for x in each)

    (b0, s0, n0), (b1, s1, n1) = summed(before), summed(after)
    if n1 <= n0:
        return "poll lag: no polls"
    return (f"poll lag over {n1 - n0:.0f} polls: p50 <= {quantile_bound(b0, b1, 0.5):g} s, "
            f"p99 <= {quantile_bound(b0, b1, 0.99):g} s, mean {(s1 - s0) / (n1 - n0):.3f} s "
            f"(interval {interval:g} s)")


def create_taskqueues(cp: ControlPlane, url: str, n: int, interval: float) -> None:
    r = redis.Redis.from_url(url)
    docs = []
    for i in range(n):
        name = f"tq{i}"
        if i % 3 == 0:
            r.lpush(f"{name}:hi", *[b"x"] * random.randint(1, 50))
        docs.append(taskqueue(name, url, queues=[{"key": f"{name}:hi"}, {"key": f"{name}:lo"}],
                              scaling={"pollIntervalSeconds": interval, "maxReplicas": 2,
                                       "idleCooldownSeconds": 30}))
    cp.kubectl("create", "-n", "bench", "-f", "-", input=yaml.safe_dump_all(docs), timeout=600)


def start(cp: ControlPlane, name: str, tmp: Path,
          pythonpath: Path | None) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    exe = shutil.which("taskqueue-operator") or "taskqueue-operator"
    log = (tmp / f"{name}.log").open("wb")
    proc = subprocess.Popen(
        [exe, "--namespace", "bench", "--metrics-port", str(port), "--metrics-address",
         "127.0.0.1", "--health-port", "0", "--kubeconfig", str(cp.kubeconfig),
         "--leader-election-namespace", "bench", "--sharding", "--log-format", "text",
         "--log-level", "WARNING"],
        env={**os.environ, "POD_NAME": name,
             **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})},
        stdout=log, stderr=subprocess.STDOUT)
    return proc, port


def spy(folder: Path, pid: int, name: str, seconds: float) -> subprocess.Popen[bytes]:
    """py-spy sampling `pid` for `seconds` (100 Hz, without pausing it), folded stacks."""
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [shutil.which("py-spy") or "py-spy", "record", "--pid", str(pid), "--duration",
         str(int(seconds)), "--rate", "100", "--nonblocking", "--format", "raw", "--output",
         str(folder / f"{name}.folded")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def one_count(args: argparse.Namespace, cp: ControlPlane, replicas: int, tmp: Path,
              pythonpath: Path | None = None) -> None:
    tag = "baseline" if pythonpath else "this tree"
    ops = [start(cp, f"op{replicas}-{i}", tmp, pythonpath) for i in range(replicas)]
    started = time.monotonic()
    try:
        while time.monotonic() - started < args.startup_timeout:
            time.sleep(max(2.0, args.taskqueues / 500))
            with contextlib.suppress(OSError):
                if sum(scrape(port)[1] for _, port in ops) >= args.taskqueues:
                    break
        print(f"[{tag}] replicas={replicas}: every TaskQueue polled "
              f"{time.monotonic() - started:.0f}s after start", flush=True)
        time.sleep(args.settle)
        pids = {"api": cp.pids["kube-apiserver"], "etcd": cp.pids["etcd"]}
        cpu0 = [cpu_seconds(p.pid) for p, _ in ops]
        other0 = {k: cpu_seconds(p) for k, p in pids.items()}
        polls0 = [scrape(port)[0] for _, port in ops]
        lag0 = [lag_buckets(port) for _, port in ops]
        requests0 = apiserver_requests(cp)
        wall0 = time.monotonic()
        spies = [spy(args.py_spy, p.pid, f"{'base' if pythonpath else 'op'}{replicas}-{i}",
                     args.seconds)
                 for i, (p, _) in enumerate(ops)] if args.py_spy else []
        rss = [0.0] * replicas
        while time.monotonic() - wall0 < args.seconds:
            rss = [max(m, rss_mib(p.pid)) for m, (p, _) in zip(rss, ops, strict=True)]
            time.sleep(min(5.0, max(0.0, args.seconds - (time.monotonic() - wall0))))
        after = [scrape(port) for _, port in ops]
        lag1 = [lag_buckets(port) for _, port in ops]
        requests = apiserver_requests(cp) - requests0
        wall = time.monotonic() - wall0
        for s in spies:  # a py-spy that did not finish (a loaded machine) is stopped
            try:
                s.wait(timeout=120)
            except subprocess.TimeoutExpired:
                s.kill()
                s.wait()
        cpu = [cpu_seconds(p.pid) - c for (p, _), c in zip(ops, cpu0, strict=True)]
        other = {k: (cpu_seconds(p) - other0[k]) / wall for k, p in pids.items()}
        polls = sum(a[0] for a in after) - sum(polls0)
        expected = args.taskqueues / args.interval
        print(f"[{tag}] replicas={replicas} taskqueues={args.taskqueues} "
              f"interval={args.interval:g}s window={wall:.0f}s: polls {polls / wall:.1f}/s of "
              f"{expected:.1f}/s expected "
              f"({polls / wall / expected:.2f}); effective poll period "
              f"{args.taskqueues * wall / max(polls, 1):.2f}s")
        print(f"  operator cores: total {sum(cpu) / wall:.3f} ("
              + ", ".join(f"{c / wall:.3f}" for c in cpu) + "); RSS max MiB: "
              + ", ".join(f"{m:.0f}" for m in rss) + "; owned: "
              + ", ".join(f"{a[2]:.0f}" for a in after)
              + f"; kube-apiserver {other['api']:.3f} cores, etcd {other['etcd']:.3f} cores",
              flush=True)
        print(f"  CPU per poll {1000 * sum(cpu) / max(polls, 1):.2f} ms; "
              + lag_line(lag0, lag1, args.interval), flush=True)
        print("  API requests per poll: " + ", ".join(
            f"{k} {n / max(polls, 1):.3f}" for k, n in sorted(requests.items())
            if n > 0 and not k.startswith("flow schema")), flush=True)
    finally:
        for p, _ in ops:
            p.terminate()
        for p, _ in ops:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--taskqueues", type=int, default=1000)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--replicas", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seconds", type=float, default=60.0, help="measured window")
    p.add_argument("--settle", type=float, default=20.0)
    p.add_argument("--startup-timeout", type=float, default=300.0)
    p.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                   help="also run, before each replica count, the operator package in DIR")
    p.add_argument("--py-spy", type=Path, default=None, metavar="DIR",
                   help="sample each replica with py-spy over the window into DIR")
    args = p.parse_args()
    controllers = [c for c in DEFAULT_CONTROLLERS
                   if c not in ("deployment-controller", "replicaset-controller")]
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(controllers=controllers) as cp:
        server = RedisServer(data_dir=Path(tmp) / "redis")
        server.start()
        try:
            cp.kubectl("apply", "-f", str(ROOT / "crds" / "taskqueue.dev_taskqueues.yaml"))
            for attempt in range(10):  # kubectl wait fails while the CRD has no status yet
                try:
                    cp.wait_established("crd/taskqueues.taskqueue.dev")
                    break
                except CommandError:
                    if attempt == 9:
                        raise
                    time.sleep(1)
            cp.kubectl("create", "namespace", "bench")
            t = time.monotonic()
            create_taskqueues(cp, server.url, args.taskqueues, args.interval)
            print(f"created {args.taskqueues} TaskQueues in {time.monotonic() - t:.0f}s",
                  flush=True)
            for replicas in args.replicas:
                if args.baseline:
                    one_count(args, cp, replicas, Path(tmp), args.baseline)
                one_count(args, cp, replicas, Path(tmp))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
