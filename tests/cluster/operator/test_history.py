"""The history and the decision log against the real API server + controller-manager and a real
redis-server: the operator scaling a TaskQueue up and down writes one decision entry per change
with the rule that decided it, a history point per interval, keeps both streams capped, and
writes nothing with spec.history.retentionSeconds 0 (docs/contracts.md has the format)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import redis

from taskqueue.api import manifest
from taskqueue.wire import history, keys
from taskqueue_devcluster import ControlPlane
from tests.fixtures.redis_server import RedisServer
from tests.helpers.kube import OperatorThread, apply, replicas, taskqueue
from tests.helpers.wait import wait_for

Start = Callable[..., OperatorThread]
MakeRedis = Callable[..., RedisServer]
NODE_ENTRIES = 2
"""stream-node-max-entries of the test's Redis: MAXLEN ~ trims whole nodes of this many."""


def entries(r: redis.Redis, schema: keys.KeySchema) -> list[tuple[int, int, str, int]]:
    """(from, to, rule, pods quiesced) of each decision entry, oldest first."""
    return [(e.previous, e.replicas, e.rule, len(e.quiesced))
            for _, e in history.decisions(r.xrange(schema.decisions))]


def test_one_decision_entry_per_change_and_a_point_per_interval(
    control_plane: ControlPlane, namespace: str, run_operator: Start,
    redis_factory: MakeRedis,
) -> None:
    server = redis_factory()
    r = redis.Redis.from_url(server.url)
    r.config_set("stream-node-max-entries", NODE_ENTRIES)
    tq = taskqueue("hist", server.url, scaling={"targetBacklogPerReplica": 1,
                                                "idleCooldownSeconds": 0},
                   history={"intervalSeconds": 1, "retentionSeconds": 3600})
    schema = keys.KeySchema.from_spec(manifest.parse(tq).spec)
    run_operator(namespace)
    apply(control_plane, namespace, tq)
    wait_for("the first entry", lambda: entries(r, schema) == [(0, 0, "idle", 0)])
    r.lpush("hist:jobs", "a", "b", "c")
    wait_for("3 replicas", lambda: replicas(control_plane, namespace, "hist-worker") == 3)
    wait_for("the scale-up entry", lambda: len(entries(r, schema)) == 2)
    time.sleep(3)  # three polls holding 3: the same rule (the load's), no entry
    r.delete("hist:jobs")
    wait_for("0 replicas", lambda: replicas(control_plane, namespace, "hist-worker") == 0)
    got = wait_for("the scale-in and the release", lambda: (
        lambda e: e if len(e) >= 4 else None)(entries(r, schema)))
    time.sleep(3)  # three idle polls: nothing changes, nothing is written
    got = entries(r, schema)
    (first, up, down, released) = got  # exactly one entry per change
    assert (first, up) == ((0, 0, "idle", 0), (0, 3, "scale-up", 0))
    # the pods removed were quiesced first (the ReplicaSet had made 2 or 3 of them), then let go
    assert down[:3] == (3, 0, "idle") and down[3] in (2, 3)
    assert released == (0, 0, "idle", 0)
    last = history.decisions(r.xrevrange(schema.decisions, count=2))
    assert last[1][1].removed == 3 and last[1][1].backlog == 0
    # a point per 1 s interval, each covering the time since the one before
    points = [p for _, p in history.points(r.xrange(schema.history))]
    assert len(points) >= 8
    for before, point in itertools.pairwise(points):
        assert point.t // 1000 > before.t // 1000
        assert point.dt == point.t - before.t
    busy = [p for p in points if p.desired == 3]
    assert busy and any(p.queues["hist:jobs"].backlog == 3 for p in busy)
    assert any(p.queues["hist:jobs"].arrived == 3 for p in points)
    # a shorter retention trims the history at the next appends (MAXLEN ~: whole nodes)
    tq["spec"]["history"] = {"intervalSeconds": 1, "retentionSeconds": 3, "decisions": 1}
    apply(control_plane, namespace, tq)
    wait_for("capped", lambda: r.xlen(schema.history) <= 3 + NODE_ENTRIES, timeout=60)
    r.lpush("hist:jobs", "d")  # a change: one more entry, and the log trimmed with it
    wait_for("the log capped", lambda: r.xlen(schema.decisions) <= 1 + NODE_ENTRIES
             and entries(r, schema)[-1][:3] == (0, 1, "scale-up"))


def test_retention_zero_writes_neither_stream(
    control_plane: ControlPlane, namespace: str, run_operator: Start, redis_url: str,
) -> None:
    tq: dict[str, Any] = taskqueue("quiet", redis_url, history={"retentionSeconds": 0})
    schema = keys.KeySchema.from_spec(manifest.parse(tq).spec)
    r = redis.Redis.from_url(redis_url)
    run_operator(namespace)
    apply(control_plane, namespace, tq)
    r.lpush("quiet:jobs", "a", "b")
    wait_for("scaled up", lambda: replicas(control_plane, namespace, "quiet-worker") == 1)
    time.sleep(3)  # three more polls
    assert r.exists(schema.history, schema.decisions) == 0
