"""Fixtures for end-to-end tests on a real node: kubelet + containerd + runc, real pods.

`node_cluster` (package scope) is its OWN control plane plus a `RealNode` (a scheduler and a
kubelet would otherwise also take the pods of the process-kubelet tests on the shared one). The
images come from `scripts/images --load-containerd`; a handler image (`e2e-worker`) is built
`FROM` the worker base image with the package `e2etasks` and imported too.

Pods reach the test's redis-server (127.0.0.1 only) at the CNI bridge gateway, and the API server
at the `kubernetes` Service IP: `RealNode` DNATs both to loopback. Everything FAILS, not skips,
when the node cannot run (missing binaries say which build command to run), unless
TASKQUEUE_SKIP_CLUSTER=1.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis as redis_client

from taskqueue_devcluster import BinariesNotBuiltError, ControlPlane, find_bin_dir
from taskqueue_devcluster.node import (
    NODE_CONTROLLERS,
    RealNode,
    missing_requirements,
    nodeconfig,
)
from tests.fixtures.images import Engine
from tests.fixtures.redis_server import RedisServer

REPO = Path(__file__).resolve().parents[3]
HANDLER_IMAGE = "localhost/taskqueue-e2e-worker:1"
HANDLER = '''"""Tasks for the real-node e2e tests: sleep for the payload's seconds, then say
so; note when the task started (`timed`); or log the start of a scheduled task (`started`)."""
import os
import time


def work(payload: str) -> None:
    time.sleep(float(payload))
    print(f"done {payload} in {os.environ.get('TASKQUEUE_WORKER_ID')}", flush=True)


_started = None


def timed(payload: str) -> None:
    """`<index> <seconds>`: note the start time in Redis (tests/helpers/fidelity.py), sleep."""
    global _started
    index, seconds = payload.split()
    if _started is None:
        import redis
        _started = redis.Redis.from_url(os.environ["FIDELITY_REDIS_URL"])
    _started.hset("fidelity:started", index, repr(time.time()))
    time.sleep(float(seconds))


def started(payload: str, context: object) -> None:
    """The schedule lateness test's handler: its task id and its start (unix s) in the log, in
    one write(2) (print's separate newline would interleave with the other slots' lines)."""
    at = time.time()
    os.write(1, f"started {getattr(context, 'id')} {at:.6f}\\n".encode())
'''


@dataclass
class NodeCluster:
    cp: ControlPlane
    node: RealNode
    redis: RedisServer

    @property
    def redis_url_for_pods(self) -> str:
        return f"redis://{nodeconfig.POD_GATEWAY}:{self.redis.port}/0"


def uninstall_release(cp: ControlPlane, *, release: str, namespace: str,
                      taskqueues: Sequence[str] = ()) -> None:
    """Undo a module's `helm install`: its TaskQueues while their operator still runs (it lifts
    the finalizer), the release, the CRD the chart keeps on uninstall (else the next module's
    release cannot own it and its install fails), the namespace. Every module that installs the
    chart ends with this."""
    for name in taskqueues:
        cp.kubectl("delete", "taskqueue", name, "-n", namespace, "--wait", "--timeout=60s",
                   check=False)
    cp.helm("uninstall", release, "-n", namespace, "--wait", check=False)
    cp.kubectl("delete", "crd", "taskqueues.taskqueue.dev", "--wait", "--timeout=60s",
               check=False)
    cp.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def _fail(message: str) -> None:
    pytest.fail(message + " (TASKQUEUE_SKIP_CLUSTER=1 skips the cluster tests)", pytrace=False)


def _save(engine: Engine, image: str, out: Path) -> Path:
    name = f"docker.io/library/{image}" if "/" not in image.split(":")[0] else image
    engine.run("tag", image, name)
    fmt = ["--format", "docker-archive"] if engine.cli == "podman" else []
    engine.run("save", *fmt, "-o", str(out), name, timeout=600)
    return out


def _handler_image(engine: Engine, work: Path) -> str:
    pkg = work / "ctx" / "e2etasks"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tasks.py").write_text(HANDLER)
    (work / "ctx" / "Dockerfile").write_text(
        f"FROM {engine.worker_image}\nCOPY e2etasks/ /app/e2etasks/\n")
    engine.run("build", "-q", "-t", HANDLER_IMAGE, str(work / "ctx"), timeout=600)
    return HANDLER_IMAGE


@contextmanager
def running_node(engine: Engine, work: Path) -> Iterator[NodeCluster]:
    """Its own control plane, a real node with the operator, worker and handler images
    imported, and a redis-server the pods reach; for the fixture and the node benchmarks.
    Raises (pytest.fail) when the node cannot run, naming what to build."""
    try:
        bin_dir = find_bin_dir()
    except BinariesNotBuiltError as e:
        _fail(f"no control plane: {e}")
    missing = missing_requirements(bin_dir)
    if missing:
        _fail("cannot run the real node: " + "; ".join(missing))
    redis = RedisServer(data_dir=work / "redis")
    redis.start()
    # Still bound to 127.0.0.1 only; pods arrive there through the node's DNAT, from pod IPs,
    # which protected mode would refuse.
    redis_client.Redis(port=redis.port).config_set("protected-mode", "no")
    # A short state path: unix socket paths are limited to 108 bytes.
    state = Path(tempfile.mkdtemp(prefix="tqnode-"))
    with ControlPlane(state_dir=work / "cp", bin_dir=bin_dir,
                      controllers=NODE_CONTROLLERS) as cp, \
            RealNode(cp, state_dir=state) as node:
        for image in (engine.operator_image, engine.worker_image,
                      _handler_image(engine, work)):
            node.load_image(_save(engine, image, work / f"{len(os.listdir(work))}.tar"))
        try:
            yield NodeCluster(cp=cp, node=node, redis=redis)
        finally:
            redis.stop()
    if not node.mounts():  # never remove a tree something is still mounted in
        shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="package")
def node_cluster(engine: Engine, tmp_path_factory: pytest.TempPathFactory,
                 ) -> Iterator[NodeCluster]:
    if os.environ.get("TASKQUEUE_SKIP_CLUSTER") == "1":
        pytest.skip("TASKQUEUE_SKIP_CLUSTER=1")
    with running_node(engine, tmp_path_factory.mktemp("real-node")) as nc:
        yield nc
