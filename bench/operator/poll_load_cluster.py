"""Operator poll load on a real control plane: N TaskQueues polled every P seconds.

The real `taskqueue-operator` runs as a subprocess (kopf: watch streams, one daemon per
TaskQueue, Lease renewal, the `kubernetes` client's HTTP calls) against the real control plane
(scripts/control-plane: etcd + kube-apiserver + controller-manager, no scheduler or kubelet, so
worker pods stay Pending and Deployments are only scaled) and a real redis-server. One third of
the TaskQueues have a backlog in Redis. After every TaskQueue has been polled once, a settle
time and until the controller-manager has stopped creating ReplicaSets and Pending pods for the
new Deployments (10 s without such writes), it measures over a steady-state window:

- operator CPU (cores): utime + stime of the operator process from /proc/<pid>/stat;
- polls: sum of `taskqueue_poll_duration_seconds_count` from the operator's /metrics;
- Redis round trips per poll: EVALSHA + EVAL calls (INFO commandstats) / polls;
- API server requests: `apiserver_request_total` from the API server's /metrics, by verb and
  resource. That counter has no client label: the controller-manager's requests are in it too
  (it is idle at steady state: no replica changes, no kubelet). The same requests are also
  split by API Priority and Fairness flow schema, which tells the operator (admin kubeconfig:
  `exempt`) from the controller-manager (service accounts);
- CPU of kube-apiserver, etcd, controller-manager and redis-server over the same window;
- poll lag: how late each poll started after it was due, from the operator's
  `taskqueue_poll_lag_seconds` histogram over the window (p50/p99 read from its buckets: the
  bucket's upper bound, so "p99 <= 0.1 s"), and its mean (sum / count);
- the operator's RSS, sampled every 5 s in the window (the largest), and the API server's and
  etcd's.

    python bench/operator/poll_load_cluster.py --taskqueues 500 --interval 5 --seconds 60
    python bench/operator/poll_load_cluster.py --taskqueues 3000 --interval 5 --seconds 60 \
        --no-workload-controllers

`--no-workload-controllers` runs the controller-manager without its deployment and replicaset
controllers: the operator's Deployments then get no ReplicaSets and no Pending pods (at 20
requests/s the controller-manager needs minutes for thousands), which changes nothing the
operator does at steady state (no kubelet: the pods would stay Pending anyway).

Not part of the tests.
"""

from __future__ import annotations

import argparse
import collections
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

from tests.fixtures.redis_server import RedisServer, free_port  # noqa: E402
from tests.helpers.kube import taskqueue  # noqa: E402

from taskqueue_devcluster import ControlPlane  # noqa: E402
from taskqueue_devcluster.controlplane import DEFAULT_CONTROLLERS  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
SAMPLE = re.compile(r'^(\w+)\{(.*)\}\s+(\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    found = []
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m and m.group(1) == name:
            found.append((dict(LABEL.findall(m.group(2))), float(m.group(3))))
    return found


def operator_polls(metrics_port: int) -> tuple[int, int]:
    """(polls so far, TaskQueues polled at least once) from the operator's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=60) as r:
        text = r.read().decode()
    counts = [v for _, v in samples(text, "taskqueue_poll_duration_seconds_count")]
    return int(sum(counts)), sum(1 for v in counts if v > 0)


def apiserver_requests(cp: ControlPlane) -> collections.Counter[str]:
    """apiserver_request_total by 'VERB resource[/subresource]' (resource requests only)."""
    with urllib.request.urlopen(cp.server + "/metrics", timeout=10,
                                context=cp.ssl_context()) as r:
        text = r.read().decode()
    out: collections.Counter[str] = collections.Counter()
    for labels, value in samples(text, "apiserver_flowcontrol_dispatched_requests_total"):
        out[f"flow schema {labels.get('flow_schema')}"] += int(value)
    for labels, value in samples(text, "apiserver_request_total"):
        if not labels.get("resource"):
            continue
        sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
        out[f"{labels['verb']} {labels['resource']}{sub}"] += int(value)
    return out


def controller_writes(requests: collections.Counter[str]) -> int:
    """Writes that only the controller-manager makes here (ReplicaSets, Pods, Deployment status)."""
    return sum(n for k, n in requests.items() if k.startswith(("POST ", "PUT "))
               and k.split()[1] in ("replicasets", "replicasets/status", "pods",
                                    "deployments/status"))


def lag_buckets(metrics_port: int) -> tuple[dict[float, float], float, float]:
    """The poll-lag histogram: cumulative counts by upper bound, its sum and its count."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=60) as r:
        text = r.read().decode()
    buckets = {float(labels["le"]): v
               for labels, v in samples(text, "taskqueue_poll_lag_seconds_bucket")}
    total = sum(v for line in text.splitlines()
                if line.startswith("taskqueue_poll_lag_seconds_sum ")
                for v in [float(line.split()[1])])
    count = sum(v for line in text.splitlines()
                if line.startswith("taskqueue_poll_lag_seconds_count ")
                for v in [float(line.split()[1])])
    return buckets, total, count


def quantile_bound(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """The upper bound of the bucket holding the q-quantile of the observations in between."""
    deltas = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    total = deltas[-1][1] if deltas else 0.0
    for le, cumulative in deltas:
        if total and cumulative >= q * total:
            return le
    return float("nan")


def script_calls(url: str) -> tuple[int, int]:
    """(EVALSHA + EVAL calls, all commands except INFO) from INFO commandstats."""
    stats = redis.Redis.from_url(url).info("commandstats")
    scripts = sum(int(v["calls"]) for k, v in stats.items()
                  if k in ("cmdstat_evalsha", "cmdstat_eval"))
    total = sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")
    return scripts, total


def create_taskqueues(cp: ControlPlane, url: str, n: int, interval: float,
                      max_replicas: int) -> None:
    r = redis.Redis.from_url(url)
    docs = []
    for i in range(n):
        name = f"tq{i}"
        if i % 3 == 0:
            r.lpush(f"{name}:hi", *[b"x"] * random.randint(1, 50))
        docs.append(taskqueue(name, url, queues=[{"key": f"{name}:hi"}, {"key": f"{name}:lo"}],
                              scaling={"pollIntervalSeconds": interval,
                                       "maxReplicas": max_replicas,
                                       "idleCooldownSeconds": 30}))
    cp.kubectl("create", "-n", "bench", "-f", "-", input=yaml.safe_dump_all(docs),
               timeout=300)


def run(args: argparse.Namespace, cp: ControlPlane, server: RedisServer, tmp: Path) -> None:
    cp.kubectl("apply", "-f", str(ROOT / "crds" / "taskqueue.dev_taskqueues.yaml"))
    cp.wait_established("crd/taskqueues.taskqueue.dev")
    cp.kubectl("create", "namespace", "bench")
    t = time.monotonic()
    create_taskqueues(cp, server.url, args.taskqueues, args.interval, args.max_replicas)
    print(f"created {args.taskqueues} TaskQueues in {time.monotonic() - t:.1f}s", flush=True)

    metrics_port = free_port()
    exe = shutil.which("taskqueue-operator") or "taskqueue-operator"
    log = (tmp / "operator.log").open("wb")
    started = time.monotonic()
    op = subprocess.Popen(
        [exe, "--namespace", "bench", "--metrics-port", str(metrics_port),
         "--health-port", str(free_port()), "--kubeconfig", str(cp.kubeconfig),
         "--leader-election-namespace", "bench", "--log-format", "text",
         "--log-level", args.log_level],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        measure(args, cp, server, op.pid, metrics_port, started)
    finally:
        op.terminate()
        try:
            op.wait(timeout=60)
        except subprocess.TimeoutExpired:
            op.kill()
            op.wait()
        log.close()
        errors = [ln for ln in (tmp / "operator.log").read_text(errors="replace").splitlines()
                  if " ERROR " in ln or "Traceback" in ln]
        print(f"operator exit code after SIGTERM: {op.returncode}; "
              f"log: {len(errors)} ERROR/Traceback lines"
              + (f"; first: {errors[0][:300]}" if errors else ""))


def measure(args: argparse.Namespace, cp: ControlPlane, server: RedisServer, pid: int,
            metrics_port: int, started: float) -> None:
    polled = 0
    deadline = started + args.startup_timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            _, polled = operator_polls(metrics_port)
        if polled >= args.taskqueues:
            break
        time.sleep(max(1.0, args.taskqueues / 1000))  # each scrape costs the operator too
    startup = time.monotonic() - started
    startup_cpu = cpu_seconds(pid)
    print(f"{polled}/{args.taskqueues} TaskQueues polled at least once {startup:.1f}s after "
          f"the operator started (operator CPU so far {startup_cpu:.1f}s)", flush=True)
    time.sleep(args.settle)
    # The controller-manager (client QPS 20) is still creating ReplicaSets and Pending pods for
    # the new Deployments: wait until it has stopped writing for 10 s, so the window is steady.
    quiet_since, settle_deadline = time.monotonic(), time.monotonic() + args.settle_timeout
    last = controller_writes(apiserver_requests(cp))
    while time.monotonic() < settle_deadline and time.monotonic() - quiet_since < 10:
        time.sleep(2)
        now = controller_writes(apiserver_requests(cp))
        if now != last:
            quiet_since, last = time.monotonic(), now
    print(f"controller-manager quiet; measuring from {time.monotonic() - started:.0f}s after "
          f"the operator started", flush=True)

    pids = {"operator": pid, "redis-server": server.proc.pid if server.proc else 0,
            **cp.pids}
    cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
    # Redis first, then the poll count, at both ends: a poll's EVALSHA comes before its count.
    scripts0, total0 = script_calls(server.url)
    polls0, _ = operator_polls(metrics_port)
    lag0, lag_sum0, lag_n0 = lag_buckets(metrics_port)
    api0 = apiserver_requests(cp)
    wall0 = time.monotonic()
    rss = {k: 0.0 for k in ("operator", "kube-apiserver", "etcd")}
    while time.monotonic() - wall0 < args.seconds:
        for k in rss:
            with contextlib.suppress(OSError):
                rss[k] = max(rss[k], rss_mib(pids[k]))
        time.sleep(min(5.0, max(0.0, args.seconds - (time.monotonic() - wall0))))
    api1 = apiserver_requests(cp)
    scripts1, total1 = script_calls(server.url)
    lag1, lag_sum1, lag_n1 = lag_buckets(metrics_port)
    polls1, polled = operator_polls(metrics_port)
    wall = time.monotonic() - wall0
    cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}

    polls = polls1 - polls0
    print(f"taskqueues={args.taskqueues} interval={args.interval:g}s window={wall:.1f}s "
          f"(after {args.settle:g}s settle) polls={polls} ({polls / wall:.1f}/s; "
          f"{args.taskqueues / args.interval:.1f}/s expected)")
    cores = (cpu1['operator'] - cpu0['operator']) / wall
    print(f"operator CPU: {cpu1['operator'] - cpu0['operator']:.2f}s = {cores:.3f} cores "
          f"({1000 * cores / args.taskqueues:.3f} millicores per TaskQueue); RSS max "
          f"{rss['operator']:.0f} MiB ({1024 * rss['operator'] / args.taskqueues:.0f} KiB per "
          f"TaskQueue); kube-apiserver RSS {rss['kube-apiserver']:.0f} MiB, etcd RSS "
          f"{rss['etcd']:.0f} MiB")
    lags = lag_n1 - lag_n0
    if lags:
        print(f"poll lag over {lags:.0f} polls: p50 <= {quantile_bound(lag0, lag1, 0.5):g} s, "
              f"p99 <= {quantile_bound(lag0, lag1, 0.99):g} s, mean "
              f"{(lag_sum1 - lag_sum0) / lags:.3f} s (interval {args.interval:g} s)")
    others = ", ".join(f"{k} {(cpu1[k] - cpu0[k]) / wall:.3f}" for k in pids if k != "operator")
    print(f"other processes (cores): {others}")
    if polls:
        print(f"redis round trips per poll: {(scripts1 - scripts0) / polls:.3f} (EVALSHA/EVAL); "
              f"all commands per poll: {(total1 - total0) / polls:.2f}")
        diff = {k: api1[k] - api0.get(k, 0) for k in api1 if api1[k] - api0.get(k, 0)}
        flows = {k: diff.pop(k) for k in list(diff) if k.startswith("flow schema ")}
        total = sum(diff.values())
        print(f"API server requests in the window: {total} ({total / wall:.1f}/s, "
              f"{total / polls:.3f} per poll)")
        for key, n in sorted(diff.items(), key=lambda kv: -kv[1]):
            print(f"  {key}: {n} ({n / polls:.3f} per poll)")
        print("requests by API Priority and Fairness flow schema (the operator and this script "
              "are admin = 'exempt'; the controller-manager uses service accounts): "
              + ", ".join(f"{k[12:]} {n}" for k, n in sorted(flows.items(), key=lambda kv: -kv[1])))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--taskqueues", type=int, default=500)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--seconds", type=float, default=60.0, help="measured window")
    p.add_argument("--settle", type=float, default=15.0,
                   help="seconds after every TaskQueue's first poll before measuring")
    p.add_argument("--settle-timeout", type=float, default=180.0,
                   help="longest wait for the controller-manager to stop writing")
    p.add_argument("--max-replicas", type=int, default=2)
    p.add_argument("--startup-timeout", type=float, default=180.0,
                   help="give up waiting for every TaskQueue's first poll after this")
    p.add_argument("--log-level", default="WARNING", help="the operator's")
    p.add_argument("--no-workload-controllers", action="store_true",
                   help="no deployment and replicaset controllers in the controller-manager")
    args = p.parse_args()
    controllers = [c for c in DEFAULT_CONTROLLERS
                   if not (args.no_workload_controllers
                           and c in ("deployment-controller", "replicaset-controller"))]
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(controllers=controllers) as cp:
        server = RedisServer(data_dir=Path(tmp) / "redis")
        server.start()
        try:
            run(args, cp, server, Path(tmp))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
