"""The local demo: Redis + control plane + helm chart + operator + a burst of tasks, watched live.

Run through `scripts/demo` (which installs what is needed first). Every part is real except the
container runtime: the process kubelet runs worker pods as local `taskqueue-worker` processes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "operator"))
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "devcluster"))

from tests.fixtures.redis_server import RedisServer  # noqa: E402

from taskqueue import client as tq_client  # noqa: E402
from taskqueue_devcluster.controlplane import ControlPlane, ControlPlaneError  # noqa: E402
from taskqueue_devcluster.kubelet import ProcessKubelet  # noqa: E402

RELEASE_NS = "taskqueue-system"
DEMO_NS = "demo"
CHART = REPO / "charts" / "taskqueue-operator"


def manifest(redis_url: str, *, max_replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "taskqueue.dev/v1alpha1",
        "kind": "TaskQueue",
        "metadata": {"name": "thumbnails", "namespace": DEMO_NS},
        "spec": {
            "redis": {"url": redis_url},
            "queues": [{"key": "demo:vip", "starvationLimit": 3}, {"key": "demo:normal"}],
            "worker": {"handler": "taskqueue.worker.builtin:sleep", "concurrency": 2,
                       "terminationGracePeriodSeconds": 10},
            "scaling": {"minReplicas": 0, "maxReplicas": max_replicas,
                        "targetBacklogPerReplica": 20, "pollIntervalSeconds": 1,
                        "scaleDownStabilizationSeconds": 5, "idleCooldownSeconds": 8},
        },
    }


def row(cp: ControlPlane) -> tuple[str, dict[str, Any]]:
    tq = json.loads(cp.kubectl("get", "tq", "thumbnails", "-n", DEMO_NS, "-o", "json").stdout)
    st = tq.get("status") or {}
    backlog = st.get("backlog") or {}
    pods = json.loads(cp.kubectl("get", "pods", "-n", DEMO_NS, "-o", "json").stdout)["items"]
    ready = sum(
        1 for p in pods
        if any(c["type"] == "Ready" and c["status"] == "True"
               for c in (p.get("status") or {}).get("conditions") or [])
        and not p["metadata"].get("deletionTimestamp")
    )
    line = (
        f"{backlog.get('demo:vip', 0):>7} {backlog.get('demo:normal', 0):>8} "
        f"{st.get('inFlight', 0):>9} {st.get('desiredReplicas', '-')!s:>8} "
        f"{st.get('replicas', '-')!s:>9} {ready:>6}  {st.get('reason', '')}"
    )
    return line, st


def watch(cp: ControlPlane, *, timeout: float) -> bool:
    print(f"{'t(s)':>5} {'vip':>7} {'normal':>8} {'in-flight':>9} {'desired':>8} "
          f"{'replicas':>9} {'ready':>6}  reason", flush=True)
    start = time.monotonic()
    scaled_out = False
    while time.monotonic() - start < timeout:
        line, st = row(cp)
        print(f"{time.monotonic() - start:5.0f} {line}", flush=True)
        replicas = st.get("replicas") or 0
        scaled_out = scaled_out or replicas > 0
        if scaled_out and replicas == 0 and not st.get("totalBacklog") and not st.get("inFlight"):
            return True
        time.sleep(1)
    return False


def start_operator(cp: ControlPlane, kubeconfig: Path, log: Path) -> subprocess.Popen[bytes]:
    """`taskqueue-operator` as a local process authenticated as the chart's ServiceAccount."""
    proc = subprocess.Popen(
        ["taskqueue-operator", "--kubeconfig", str(kubeconfig), "--namespace", DEMO_NS,
         "--leader-election-namespace", RELEASE_NS, "--metrics-port", "0", "--health-port", "0"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT,
        env={**os.environ, "PATH": f"{cp.bin_dir}:{os.environ['PATH']}"},
    )
    print(f"operator running with the chart's ServiceAccount (log {log})", flush=True)
    return proc


def run_burst(cp: ControlPlane, redis_url: str, args: argparse.Namespace) -> int:
    """Apply the TaskQueue, push the burst, watch until the workers are back to zero."""
    cp.kubectl("apply", "-f", "-", input=json.dumps(manifest(redis_url,
                                                             max_replicas=args.max_replicas)))
    print(cp.kubectl("get", "tq", "-n", DEMO_NS).stdout, flush=True)
    time.sleep(2)
    r = redis.Redis.from_url(redis_url)
    for i in range(args.tasks):
        queue = "demo:vip" if i % 4 == 0 else "demo:normal"
        tq_client.enqueue_sync(r, queue, str(args.task_seconds))
    print(f"pushed {args.tasks} tasks of {args.task_seconds}s "
          "(every 4th to demo:vip, the rest to demo:normal)", flush=True)
    ok = watch(cp, timeout=args.timeout)
    print(cp.kubectl("get", "tq", "-n", DEMO_NS).stdout, flush=True)
    events = cp.kubectl("get", "events", "-n", DEMO_NS, "--field-selector",
                        "involvedObject.kind=TaskQueue", "--sort-by=.lastTimestamp").stdout
    print(events, flush=True)
    print("demo finished: scaled out and back to zero" if ok else "demo timed out")
    return 0 if ok else 1


def demo(args: argparse.Namespace, work: Path) -> int:
    server = RedisServer(data_dir=work / "redis")
    server.start()
    print(f"redis-server on {server.url}", flush=True)
    try:
        with ControlPlane(state_dir=work / "cluster") as cp:
            print(f"control plane up: {cp.server} (kubeconfig {cp.kubeconfig})", flush=True)
            cp.kubectl("create", "namespace", DEMO_NS)
            cp.helm("install", "taskqueue-operator", str(CHART), "-n", RELEASE_NS,
                    "--create-namespace", "--set", f"watchNamespaces={{{DEMO_NS}}}",
                    "--set", "replicaCount=0")
            print("helm install taskqueue-operator charts/taskqueue-operator: deployed "
                  "(replicaCount=0: the operator runs here, with the chart's ServiceAccount)",
                  flush=True)
            sa_kubeconfig = cp.token_kubeconfig(RELEASE_NS, "taskqueue-operator",
                                                work / "operator.kubeconfig")
            with ProcessKubelet(cp.kubeconfig, namespaces=[DEMO_NS], log_dir=work / "pods"):
                operator = start_operator(cp, sa_kubeconfig, work / "operator.log")
                try:
                    return run_burst(cp, server.url, args)
                finally:
                    operator.terminate()
                    operator.wait(timeout=15)
    finally:
        server.stop()


def _interrupt_once(signum: int, frame: object) -> None:
    """The first Ctrl-C stops the demo (cleanly, through the `finally`s); later ones are ignored
    so that the clean-up itself is not interrupted."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=200, help="tasks in the burst")
    parser.add_argument("--task-seconds", type=float, default=0.2, help="handler sleep per task")
    parser.add_argument("--max-replicas", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--keep", action="store_true",
                        help="keep the work folder (logs, etcd data) instead of removing it")
    args = parser.parse_args()

    signal.signal(signal.SIGINT, _interrupt_once)
    work = Path(tempfile.mkdtemp(prefix="taskqueue-demo-"))
    code = 1
    try:
        code = demo(args, work)
    except KeyboardInterrupt:
        print("\ninterrupted: everything the demo started is stopped", flush=True)
        code = 130
    except ControlPlaneError as e:
        print(f"demo: {e}", file=sys.stderr, flush=True)
        code = 2
    finally:
        if args.keep or code == 1:
            print(f"logs and state kept in {work} (remove it when done)", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
