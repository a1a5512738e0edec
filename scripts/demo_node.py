"""The demo's two modes: a real node (kubelet + containerd + kube-proxy) or the process kubelet.

`choose_mode` decides (pure, from what is missing); `real_node_cluster` and `process_cluster`
start what each mode needs and yield a `DemoCluster`. On the real node the operator runs as a pod
of the chart (its image and the worker's built by `scripts/images` and imported into the node's
containerd), and workers are containers; with the process kubelet the operator runs here with the
chart's ServiceAccount and workers are local `taskqueue-worker` processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from taskqueue_devcluster import nodeconfig
from taskqueue_devcluster.controlplane import BinariesNotBuiltError, ControlPlane, find_bin_dir
from taskqueue_devcluster.kubelet import ProcessKubelet
from taskqueue_devcluster.node import NODE_CONTROLLERS, RealNode, missing_requirements

REPO = Path(__file__).resolve().parents[1]
CHART = REPO / "charts" / "taskqueue-operator"
RELEASE = "taskqueue-operator"
RELEASE_NS = "taskqueue-system"
MODES = ("auto", "node", "process")
MODE_TEXT = {
    "node": "real node: kubelet + containerd + kube-proxy + CoreDNS, images from scripts/images",
    "process": "process kubelet: worker pods are local processes, the operator runs here",
}


@dataclass
class DemoCluster:
    """What the burst needs: the cluster, the Redis URL as pods see it, the worker image."""

    cp: ControlPlane
    redis_url: str
    worker_image: str | None
    mode: str


def choose_mode(requested: str, missing: list[str]) -> tuple[str, str]:
    """(mode, why): `node` when requested or possible, else `process`; `node` requested on a
    machine that cannot run it is an error (ValueError naming what is missing)."""
    if requested == "process":
        return "process", "--mode process"
    if not missing:
        return "node", "its binaries, containerd, runc and the CNI plugins are available"
    why = "missing: " + "; ".join(missing)
    if requested == "node":
        raise ValueError(f"--mode node: the real node cannot run here ({why})")
    return "process", f"the real node cannot run here ({why})"


def node_missing() -> list[str]:
    """What this machine lacks for the real node (binaries, tools, root); empty when it can."""
    try:
        bin_dir = find_bin_dir()
    except (BinariesNotBuiltError, OSError) as e:
        return [str(e)]
    return missing_requirements(bin_dir)


def _install(cp: ControlPlane, *sets: str, wait: bool) -> None:
    args = ["install", RELEASE, str(CHART), "-n", RELEASE_NS, "--create-namespace"]
    for s in sets:
        args += ["--set", s]
    cp.helm(*args, *(["--wait", "--timeout", "300s"] if wait else []), timeout=360)


def _images(socket: Path, say: Callable[[str], None]) -> tuple[str, str]:
    """Build both images (cached layers: seconds when nothing changed) into the node."""
    say("building the images with scripts/images and importing them into the node's containerd")
    proc = subprocess.run([str(REPO / "scripts" / "images"), "--load-containerd",
                           "--containerd-address", str(socket)],
                          capture_output=True, text=True, timeout=1800, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"scripts/images failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    operator, worker = proc.stdout.split()
    return operator, worker


@contextmanager
def real_node_cluster(work: Path, redis_port: int, namespace: str,
                      say: Callable[[str], None]) -> Iterator[DemoCluster]:
    """Control plane + real node; the chart installed with the operator as a pod."""
    state = Path(tempfile.mkdtemp(prefix="tqdemo-"))  # short: unix socket paths are limited
    with ControlPlane(state_dir=work / "cluster", controllers=NODE_CONTROLLERS) as cp, \
            RealNode(cp, state_dir=state) as node:
        say(f"control plane up: {cp.server} (kubeconfig {cp.kubeconfig}); node {node.name} "
            f"Ready (containerd {node.socket})")
        _, worker = _images(node.socket, say)
        cp.kubectl("create", "namespace", namespace)
        _install(cp, f"watchNamespaces={{{namespace}}}", wait=True)
        say(f"helm install {RELEASE} charts/taskqueue-operator: the operator runs as a pod "
            f"(kubectl -n {RELEASE_NS} get pods)")
        try:
            yield DemoCluster(cp, f"redis://{nodeconfig.POD_GATEWAY}:{redis_port}/0", worker,
                              "node")
        finally:
            cp.helm("uninstall", RELEASE, "-n", RELEASE_NS, check=False)
    if not node.mounts():
        shutil.rmtree(state, ignore_errors=True)


@contextmanager
def process_cluster(work: Path, redis_url: str, namespace: str,
                    say: Callable[[str], None]) -> Iterator[DemoCluster]:
    """Control plane + process kubelet; the operator runs here with the chart's ServiceAccount."""
    with ControlPlane(state_dir=work / "cluster") as cp:
        say(f"control plane up: {cp.server} (kubeconfig {cp.kubeconfig})")
        cp.kubectl("create", "namespace", namespace)
        _install(cp, f"watchNamespaces={{{namespace}}}", "replicaCount=0", wait=False)
        say(f"helm install {RELEASE} charts/taskqueue-operator: deployed (replicaCount=0: the "
            "operator runs here, with the chart's ServiceAccount)")
        kubeconfig = cp.token_kubeconfig(RELEASE_NS, RELEASE, work / "operator.kubeconfig")
        with ProcessKubelet(cp.kubeconfig, namespaces=[namespace], log_dir=work / "pods"):
            log = work / "operator.log"
            operator = subprocess.Popen(
                ["taskqueue-operator", "--kubeconfig", str(kubeconfig), "--namespace", namespace,
                 "--leader-election-namespace", RELEASE_NS, "--metrics-port", "0",
                 "--health-port", "0"],
                stdout=log.open("wb"), stderr=subprocess.STDOUT,
                env={**os.environ, "PATH": f"{cp.bin_dir}:{os.environ['PATH']}"})
            say(f"operator running with the chart's ServiceAccount (log {log})")
            try:
                yield DemoCluster(cp, redis_url, None, "process")
            finally:
                operator.terminate()
                operator.wait(timeout=15)
