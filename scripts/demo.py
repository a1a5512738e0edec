"""The local demo: Redis + control plane + helm chart + operator + a burst of tasks, watched live.

Run through `scripts/demo` (which installs what is needed first). It runs on the real node
(kubelet + containerd + kube-proxy: the operator and the workers are containers of the images
`scripts/images` builds) when this machine can run it, else on the process kubelet (worker pods are
local `taskqueue-worker` processes, the operator runs here); it prints which. `--mode` forces one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import signal
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

import demo_node  # noqa: E402 (beside this file)
from tests.fixtures.redis_server import RedisServer  # noqa: E402

from taskqueue import client as tq_client  # noqa: E402
from taskqueue_devcluster.controlplane import ControlPlane, ControlPlaneError  # noqa: E402
from taskqueue_devcluster.node import NodeError  # noqa: E402

DEMO_NS = "demo"


def say(message: str) -> None:
    print(message, flush=True)


def manifest(redis_url: str, *, max_replicas: int, image: str | None) -> dict[str, Any]:
    worker: dict[str, Any] = {"handler": "taskqueue.worker.builtin:sleep", "concurrency": 2,
                              "terminationGracePeriodSeconds": 10}
    if image:
        worker["image"] = image
    return {
        "apiVersion": "taskqueue.dev/v1alpha1",
        "kind": "TaskQueue",
        "metadata": {"name": "thumbnails", "namespace": DEMO_NS},
        "spec": {
            "redis": {"url": redis_url},
            "queues": [{"key": "demo:vip", "starvationLimit": 3}, {"key": "demo:normal"}],
            "worker": worker,
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


def run_burst(cluster: demo_node.DemoCluster, redis_url: str, args: argparse.Namespace) -> int:
    """Apply the TaskQueue, push the burst, watch until the workers are back to zero."""
    cp = cluster.cp
    cp.kubectl("apply", "-f", "-", input=json.dumps(manifest(
        cluster.redis_url, max_replicas=args.max_replicas, image=cluster.worker_image)))
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
    missing = demo_node.node_missing() if args.mode != "process" else []
    mode, why = demo_node.choose_mode(args.mode, missing)
    say(f"mode: {demo_node.MODE_TEXT[mode]} ({why})")
    server = RedisServer(data_dir=work / "redis")
    server.start()
    say(f"redis-server on {server.url}")
    try:
        with contextlib.ExitStack() as stack:
            cluster = None
            if mode == "node":
                # Still on 127.0.0.1 only; pods reach it through the node's DNAT, from pod IPs.
                redis.Redis.from_url(server.url).config_set("protected-mode", "no")
                try:
                    cluster = stack.enter_context(
                        demo_node.real_node_cluster(work, server.port, DEMO_NS, say))
                except (NodeError, RuntimeError) as e:
                    if args.mode == "node":
                        raise
                    say(f"mode: the real node failed ({e}); falling back to the "
                        f"{demo_node.MODE_TEXT['process']}")
            if cluster is None:
                cluster = stack.enter_context(
                    demo_node.process_cluster(work, server.url, DEMO_NS, say))
            return run_burst(cluster, server.url, args)
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
    parser.add_argument("--mode", choices=demo_node.MODES, default="auto",
                        help="node: the real node (kubelet + containerd); process: the process "
                             "kubelet; auto (default): the real node when this machine can run it")
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
    except (ControlPlaneError, ValueError, RuntimeError) as e:
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
