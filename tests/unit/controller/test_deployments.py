"""The Deployment cache (fed by the Deployment watch) and `Deployments.ensure` (with the worker
rules of `taskqueue.controller.admission`); the status-write throttle and the restart state."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from taskqueue.api import manifest, models
from taskqueue.controller import admission, kube, workload
from taskqueue.controller import status as statuses
from taskqueue.controller.deployments import DEPLOYMENT_REFRESH_SECONDS, Deployments
from taskqueue.controller.kube import DeploymentState
from taskqueue.controller.record import SpecError


def taskqueue(**spec: Any) -> models.TaskQueue:
    base: dict[str, Any] = {"redis": {"url": "redis://redis:6379/0"}, "queues": [{"key": "jobs"}]}
    return manifest.parse({"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
                           "metadata": {"name": "emails", "namespace": "prod"},
                           "spec": {**base, **spec}})


class FakeKube:
    """The Deployment calls of `Kube`, counted, over one stored Deployment body."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.body: dict[str, Any] | None = None

    def state(self) -> DeploymentState | None:
        if self.body is None:
            return None
        return kube.deployment_state({**self.body, "metadata": {
            **self.body["metadata"], "resourceVersion": str(self.calls.total())}})

    async def get_deployment(self, namespace: str, name: str) -> DeploymentState | None:
        self.calls["get"] += 1
        return self.state()

    async def create_deployment(self, body: dict[str, Any]) -> str | None:
        self.calls["create"] += 1
        self.body = body
        return str(self.calls.total())

    async def replace_deployment(self, body: dict[str, Any], *, replicas: int,
                                 resource_version: str) -> str | None:
        self.calls["replace"] += 1
        self.body = {**body, "spec": {**body["spec"], "replicas": replicas}}
        return str(self.calls.total())


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_watched_deployment_is_not_read_on_every_poll() -> None:
    fake, tq, clock = FakeKube(), taskqueue(), Clock()
    p = Deployments(fake, watched=True, clock=clock)  # type: ignore[arg-type]
    await p.ensure(tq, uid="u")  # missing: GET, create
    assert fake.calls == {"get": 1, "create": 1}
    await p.ensure(tq, uid="u")  # our own write: read again
    assert fake.calls["get"] == 2
    for _ in range(30):  # a minute of 2 s polls
        clock.now += 2.0 - 1e-6
        assert (await p.ensure(tq, uid="u")).replicas == 0
    assert fake.calls["get"] == 2 and fake.calls["create"] == 1

    # scaled by hand: the watch event brings the new replicas, no GET
    assert fake.body is not None
    fake.body["spec"]["replicas"] = 3
    p.saw("prod", "emails-worker", fake.state())
    assert (await p.ensure(tq, uid="u")).replicas == 3
    assert fake.calls["get"] == 2

    # the safety net: a GET once DEPLOYMENT_REFRESH_SECONDS pass without an event, however
    # many polls that is
    for _ in range(100):
        await p.ensure(tq, uid="u")
    assert fake.calls["get"] == 2
    clock.now += DEPLOYMENT_REFRESH_SECONDS
    await p.ensure(tq, uid="u")
    assert fake.calls["get"] == 3
    await p.ensure(tq, uid="u")  # the GET's state is fresh again
    assert fake.calls["get"] == 3

    # deleted: the event drops it, the next poll recreates it
    gone = fake.state()
    assert gone is not None
    fake.body = None
    p.saw("prod", "emails-worker", gone, deleted=True)
    await p.ensure(tq, uid="u")
    assert fake.calls["create"] == 2 and fake.body is not None


async def test_without_the_watch_every_poll_reads_and_scale_targets_always_do() -> None:
    fake = FakeKube()
    fake.body = workload.build_deployment(taskqueue(), uid="u", replicas=1)
    p = Deployments(fake)  # type: ignore[arg-type]
    for _ in range(3):
        await p.ensure(taskqueue(), uid="u")
    assert fake.calls["get"] == 3
    p.watched = True
    target = taskqueue(scaleTargetRef={"name": "emails-worker"})
    p.saw("prod", "emails-worker", fake.state())
    for _ in range(3):
        await p.ensure(target, uid="u")
    assert fake.calls["get"] == 6


async def test_a_changed_spec_hash_rewrites_the_cached_deployment() -> None:
    fake = FakeKube()
    p = Deployments(fake, watched=True)  # type: ignore[arg-type]
    await p.ensure(taskqueue(), uid="u")
    p.saw("prod", "emails-worker", fake.state())
    await p.ensure(taskqueue(worker={"handler": "pkg.mod:other"}), uid="u")
    assert fake.calls["replace"] == 1


async def test_a_watch_event_older_than_our_write_is_ignored() -> None:
    fake, tq = FakeKube(), taskqueue()
    p = Deployments(fake, watched=True)  # type: ignore[arg-type]
    await p.ensure(tq, uid="u")  # created at resourceVersion "2"
    created = await p.ensure(tq, uid="u")  # GET, kept
    old = kube.DeploymentState(**{**created.__dict__, "replicas": 5, "resource_version": "1"})
    p.saw("prod", "emails-worker", old)
    assert (await p.ensure(tq, uid="u")).replicas == 0
    p.wrote("prod", "emails-worker", "10")  # e.g. our scale to 2
    p.saw("prod", "emails-worker",
                     kube.DeploymentState(**{**old.__dict__, "resource_version": "9"}))
    calls = fake.calls["get"]
    await p.ensure(tq, uid="u")
    assert fake.calls["get"] == calls + 1  # the stale event was not used
    new = kube.DeploymentState(**{**old.__dict__, "replicas": 2, "resource_version": "10"})
    p.saw("prod", "emails-worker", new)
    assert (await p.ensure(tq, uid="u")).replicas == 2


def test_drift_only_and_restart_slack() -> None:
    old = {"totalBacklog": 4, "oldestTaskAgeSeconds": 10, "lastActiveTime": "2026-01-01T00:00:00Z"}
    assert statuses.drift_only(old, {**old, "oldestTaskAgeSeconds": 15,
                                   "lastActiveTime": "2026-01-01T00:00:05Z"})
    assert not statuses.drift_only(old, {**old, "totalBacklog": 3})
    assert not statuses.drift_only(None, old)
    idle = {**old, "totalBacklog": 0}
    del idle["oldestTaskAgeSeconds"]
    assert not statuses.drift_only(old, idle)
    at = statuses.from_iso("2026-01-01T00:00:00Z")
    assert at is not None
    assert statuses.initial_state(old, slack=20).last_active == at + 20
    assert statuses.initial_state(idle, slack=20).last_active == at


async def test_a_deletion_floors_only_a_tracked_deployment() -> None:
    fake, tq = FakeKube(), taskqueue()
    p = Deployments(fake, watched=True)  # type: ignore[arg-type]
    await p.ensure(tq, uid="u")
    seen = await p.ensure(tq, uid="u")  # GET: tracked now
    p.saw("prod", "emails-worker", kube.DeploymentState(**{**seen.__dict__,
                                                           "resource_version": "7"}),
          deleted=True)
    stale = kube.DeploymentState(**{**seen.__dict__, "replicas": 9, "resource_version": "6"})
    p.saw("prod", "emails-worker", stale)  # older than the deletion: ignored
    assert (await p.ensure(tq, uid="u")).replicas != 9

    p.forget("prod", "emails-worker")  # the TaskQueue is gone
    p.saw("prod", "emails-worker", stale, deleted=True)  # its Deployment's deletion arrives
    assert p._floors == {} and p._seen == {}


@pytest.mark.parametrize(
    ("spec", "labels", "refused", "calls"),
    [
        pytest.param({"worker": {"image": "evil.io/miner:1"}}, {}, "spec.worker.image", {},
                     id="image-refused-before-any-call"),
        pytest.param({"worker": {"image": "registry.example/team/w:1"}}, {}, None,
                     {"get": 1, "create": 1}, id="image-allowed-created"),
        pytest.param({"worker": {"image": "registry.example/team/w:1"},
                      "scaleTargetRef": {"name": "emails-worker"}}, {}, "spec.scaleTargetRef.name",
                     {"get": 1}, id="scale-target-without-the-label"),
        pytest.param({"worker": {"image": "registry.example/team/w:1"},
                      "scaleTargetRef": {"name": "emails-worker"}},
                     {"taskqueue.dev/scalable": "true"}, None, {"get": 1},
                     id="scale-target-with-the-label"),
    ],
)
async def test_ensure_applies_the_worker_rules(spec: dict[str, Any], labels: dict[str, str],
                                               refused: str | None,
                                               calls: dict[str, int]) -> None:
    fake = FakeKube()
    if "scaleTargetRef" in spec:  # someone else's Deployment, carrying `labels`
        body = workload.build_deployment(taskqueue(), uid="other", replicas=1)
        fake.body = {**body, "metadata": {**body["metadata"], "labels": labels}}
    rules = admission.WorkerRules(image_prefixes=("registry.example/",),
                                  scale_target_label=("taskqueue.dev/scalable", "true"))
    p = Deployments(fake, rules=rules)  # type: ignore[arg-type]
    if refused is None:
        await p.ensure(taskqueue(**spec), uid="u")
    else:
        with pytest.raises(SpecError, match=f"^{re.escape(refused)}"):
            await p.ensure(taskqueue(**spec), uid="u")
    assert dict(fake.calls) == calls
