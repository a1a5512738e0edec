"""The simulator against the real node: a 2.5-minute trace (steady, burst, lull, batch, steady)
replayed at real time with real worker pods whose handler sleeps each task's service time, then
`taskqueue simulate` on the same trace and manifest with the delays this run measured (the pods'
start-up line, the API and exit medians: `Measured.delays`), 11 times, with the first poll within
0.5 s of this run's poll phase at the batch (tests/helpers/fidelity.py, `simulate_around`). The
median simulated worker-seconds are within 15 % of the real run's, the median p95 wait within
15 % or inside the real run's 90 % band of its p95 (171 waits pin a p95 no closer), and the
median max replicas within 1. A failure's captured output holds the run's measurement (JSON,
for `bench/scaling/fidelity.py compare`).
bench/scaling/fidelity.py runs the 10-minute version (docs/benchmarks.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers import fidelity
from tests.node.e2e.conftest import HANDLER_IMAGE, NodeCluster, uninstall_release

pytestmark = pytest.mark.timeout(900)

CHART = Path(__file__).resolve().parents[3] / "charts" / "taskqueue-operator"
NS, RELEASE, NAME, QUEUE = "fidelity", "fid", "fid", "fid:q"


@pytest.fixture
def operator(node_cluster: NodeCluster) -> Iterator[NodeCluster]:
    cp = node_cluster.cp
    cp.kubectl("create", "namespace", NS)
    cp.helm("install", RELEASE, str(CHART), "-n", NS, "--set", f"watchNamespaces={{{NS}}}",
            "--wait", "--timeout", "240s", timeout=300)
    yield node_cluster
    uninstall_release(cp, release=RELEASE, namespace=NS, taskqueues=[NAME])


def test_simulation_matches_the_real_node(operator: NodeCluster) -> None:
    arrivals = fidelity.make_trace(fidelity.REDUCED, queue=QUEUE)
    tq = fidelity.manifest(name=NAME, namespace=NS, redis_url=operator.redis_url_for_pods,
                           image=HANDLER_IMAGE, queue=QUEUE, startup=fidelity.POD_STARTUP)
    operator.cp.kubectl("apply", "-f", "-", input=json.dumps(tq))
    r = redis.Redis(port=operator.redis.port)
    measured = fidelity.record(arrivals, kubeconfig=operator.cp.kubeconfig, namespace=NS,
                               name=NAME, r=r, queue=QUEUE)
    phase = fidelity.batch_phase(measured, fidelity.REDUCED, arrivals, tq)
    simulated = fidelity.simulate_around(arrivals, tq, delays=measured.delays(),
                                         poll_phase=phase)
    checks = fidelity.compare(measured, simulated)
    text = fidelity.report(measured, simulated, checks)
    print(text)
    # shown with a failure: the run replayed elsewhere by saving this line's JSON and running
    # bench/scaling/fidelity.py compare on it
    measured.note_setting(fidelity.REDUCED, pod_startup=fidelity.POD_STARTUP)
    print(f"measurement: {measured.to_json()}")
    assert measured.unserved() == 0 and simulated.unserved == 0, text
    assert measured.max_replicas() >= 3, f"the burst and the batch scaled out\n{text}"
    assert all(c.ok for c in checks), text
