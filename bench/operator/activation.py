"""Activation latency: first task pushed into an idle TaskQueue -> the Deployment's new replicas.

Real control plane (scripts/control-plane), real redis-server, the operator in-process (what the
`taskqueue-operator` console script runs). Each trial creates an idle TaskQueue, waits for its
first status, waits a random fraction of the poll interval (tasks arrive at any phase of the
poll), pushes one task and times until the Deployment's spec.replicas is 1 (watched with a
tight GET loop, 10 ms). Target: <= pollIntervalSeconds + 1 s.

    python bench/operator/activation.py --interval 5 --trials 10
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import redis

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "devcluster"))

from tests.fixtures.redis_server import RedisServer, free_port  # noqa: E402
from tests.helpers.kube import OperatorThread, apply, taskqueue  # noqa: E402

from taskqueue.controller.kube import KubeClient  # noqa: E402
from taskqueue_devcluster import ControlPlane  # noqa: E402


def trial(cp: ControlPlane, kube: KubeClient, url: str, name: str, interval: float) -> float:
    body = taskqueue(name, url, scaling={"pollIntervalSeconds": interval})
    apply(cp, "bench", body)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the first poll has run: status written
        tq = kube.custom.get_namespaced_custom_object("taskqueue.dev", "v1alpha1", "bench",
                                                      "taskqueues", name)
        if (tq.get("status") or {}).get("reason"):
            break
        time.sleep(0.05)
    time.sleep(random.uniform(0, interval))
    redis.Redis.from_url(url).lpush(f"{name}:jobs", "1")
    pushed = time.monotonic()
    while time.monotonic() - pushed < 60:
        d = kube.apps.read_namespaced_deployment(f"{name}-worker", "bench")
        if d.spec.replicas == 1:
            return time.monotonic() - pushed
        time.sleep(0.01)
    raise RuntimeError("no activation within 60 s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--trials", type=int, default=10)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ControlPlane() as cp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        cp.kubectl("apply", "-f", str(ROOT / "crds" / "taskqueue.dev_taskqueues.yaml"))
        cp.wait_established("crd/taskqueues.taskqueue.dev")
        cp.kubectl("create", "namespace", "bench")
        op = OperatorThread(["--namespace", "bench", "--metrics-port", "0", "--health-port",
                             str(free_port()), "--kubeconfig", str(cp.kubeconfig),
                             "--leader-election-namespace", "bench", "--log-format", "text"])
        op.start()
        kube = KubeClient(str(cp.kubeconfig))
        try:
            times = [trial(cp, kube, server.url, f"a{i}", args.interval)
                     for i in range(args.trials)]
        finally:
            op.stop()
            kube.close()
            server.stop()
    times.sort()
    print(f"pollIntervalSeconds={args.interval:g} trials={len(times)}")
    print(f"activation latency: min {times[0]:.2f}s  median {statistics.median(times):.2f}s  "
          f"max {times[-1]:.2f}s  (target <= {args.interval + 1:g}s)")


if __name__ == "__main__":
    main()
