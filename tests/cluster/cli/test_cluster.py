"""`--name/--namespace`: the TaskQueue and its Secret read from a real API server."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import pytest
import redis

from taskqueue.wire import history
from taskqueue_devcluster import ControlPlane
from tests.helpers.cli import Run

CRD = Path(__file__).resolve().parents[3] / "crds" / "taskqueue.dev_taskqueues.yaml"


@pytest.fixture
def crd(control_plane: ControlPlane) -> None:
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    control_plane.wait_established("crd/taskqueues.taskqueue.dev")


def _apply(cp: ControlPlane, obj: dict[str, object]) -> None:
    cp.kubectl("apply", "-f", "-", input=json.dumps(obj))


def _taskqueue(namespace: str, redis_spec: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": "thumbs", "namespace": namespace},
        "spec": {"redis": redis_spec, "queues": [{"key": "vip"}, {"key": "normal"}],
                 "scaleTargetRef": {"name": "none"}},
    }


def test_stats_of_a_taskqueue_whose_url_is_in_a_secret(
    crd: None, control_plane: ControlPlane, namespace: str, cli: Run, redis_url: str,
    redis_sync: redis.Redis,
) -> None:
    _apply(control_plane, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "redis", "namespace": namespace},
        "data": {"url": base64.b64encode(redis_url.encode()).decode()},
    })
    _apply(control_plane, _taskqueue(namespace, {"urlSecretRef": {"name": "redis", "key": "url"}}))
    redis_sync.lpush("vip", "a", "b")
    redis_sync.lpush("normal", "c")
    result = cli("stats", "--name", "thumbs", "--namespace", namespace, "--kubeconfig",
                 str(control_plane.kubeconfig), "--json", "--interval", "0")
    assert result.code == 0, result.err
    snap = result.json()
    assert snap["taskqueue"] == f"{namespace}/thumbs"
    assert [(q["key"], q["backlog"]) for q in snap["queues"]] == [("vip", 2), ("normal", 1)]


def test_enqueue_through_a_taskqueue_with_a_plain_url(
    crd: None, control_plane: ControlPlane, namespace: str, cli: Run, redis_url: str,
    redis_sync: redis.Redis,
) -> None:
    _apply(control_plane, _taskqueue(namespace, {"url": redis_url}))
    result = cli("enqueue", "--name", "thumbs", "-n", namespace, "--kubeconfig",
                 str(control_plane.kubeconfig), "normal", "x")
    assert result.code == 0, result.err
    assert redis_sync.llen("normal") == 1


def test_an_unknown_taskqueue_exits_3(
    crd: None, control_plane: ControlPlane, namespace: str, cli: Run
) -> None:
    result = cli("stats", "--name", "nope", "--namespace", namespace, "--kubeconfig",
                 str(control_plane.kubeconfig))
    assert result.code == 3
    assert result.err.startswith(f"taskqueue: TaskQueue {namespace}/nope not found")


def test_a_missing_secret_exits_3(
    crd: None, control_plane: ControlPlane, namespace: str, cli: Run
) -> None:
    _apply(control_plane, _taskqueue(namespace, {"urlSecretRef": {"name": "gone", "key": "u"}}))
    result = cli("stats", "--name", "thumbs", "--namespace", namespace, "--kubeconfig",
                 str(control_plane.kubeconfig))
    assert result.code == 3
    assert result.err.startswith(f"taskqueue: Secret {namespace}/gone not found")



def test_simulate_from_history_of_a_taskqueue_whose_url_is_in_a_secret(
    crd: None, control_plane: ControlPlane, namespace: str, cli: Run, redis_url: str,
    redis_sync: redis.Redis, tmp_path: Path,
) -> None:
    _apply(control_plane, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "redis", "namespace": namespace},
        "data": {"url": base64.b64encode(redis_url.encode()).decode()},
    })
    _apply(control_plane, _taskqueue(namespace, {"urlSecretRef": {"name": "redis", "key": "url"}}))
    now = int(time.time() * 1000)
    vip = history.QueuePoint(backlog=0, arrived=5, attempts=5, service_ms=5000,
                             service_sq_ms2=5_000_000)
    for age in (30_000, 20_000, 10_000):  # three points of 10 s: 15 vip tasks of 1 s
        point = history.HistoryPoint(t=now - age, dt=10_000, desired=1, replicas=1, ready=1,
                                     inflight=0, workers=1, queues={"vip": vip})
        redis_sync.xadd("vip:history", point.fields())
    proposed = _taskqueue(namespace, {"url": "redis://unused:6379/0"})
    proposed["spec"] = {**proposed["spec"], "scaling": {"minReplicas": 1}}  # type: ignore[dict-item]
    path = tmp_path / "proposed.json"
    path.write_text(json.dumps(proposed))
    result = cli("simulate", "--from-history", "thumbs", "-n", namespace, "--kubeconfig",
                 str(control_plane.kubeconfig), "-f", str(path), "--json")
    assert result.code == 0, result.err
    got = result.json()
    assert got["taskqueue"] == f"{namespace}/thumbs"
    assert got["tasks"] == {"vip": 15, "normal": 0}
    assert got["service_seconds"] == {"vip": 1.0}
    assert [r["scaler"] for r in got["results"]] == ["current", "proposed", "keda", "keda-tuned"]
    other = cli("simulate", "--from-history", "thumbs", "-n", "elsewhere", "--kubeconfig",
                str(control_plane.kubeconfig), "-f", str(path))
    assert other.code == 3
    assert other.err.startswith("taskqueue: TaskQueue elsewhere/thumbs not found")
