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
from taskqueue.controller.deployments import LISTING_SECONDS, Deployments
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

    async def create_deployment(self, body: dict[str, Any]) -> DeploymentState | None:
        self.calls["create"] += 1
        self.body = body
        return self.state()

    async def replace_deployment(self, body: dict[str, Any], *, replicas: int,
                                 resource_version: str) -> DeploymentState | None:
        self.calls["replace"] += 1
        self.body = {**body, "spec": {**body["spec"], "replicas": replicas}}
        return self.state()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_the_watch_is_the_deployments_state_between_writes() -> None:
    fake, tq, clock = FakeKube(), taskqueue(), Clock()
    p = Deployments(fake, watched=True, clock=clock)  # type: ignore[arg-type]
    await p.ensure(tq, uid="u")  # not seen yet: GET (missing), create
    assert fake.calls == {"get": 1, "create": 1}
    for _ in range(3600):  # two hours of 2 s polls on the create's reply, no event
        clock.now += 2.0
        assert (await p.ensure(tq, uid="u")).replicas == 0
    assert fake.calls == {"get": 1, "create": 1}

    # scaled by hand: the watch event brings the new replicas, no GET
    assert fake.body is not None
    fake.body["spec"]["replicas"] = 3
    before_ours = fake.state()
    p.saw("prod", "emails-worker", before_ours)
    assert (await p.ensure(tq, uid="u")).replicas == 3

    # our own scale: its reply's resourceVersion; an event from before it, still on its way,
    # is ignored
    p.scaled("prod", "emails-worker", 1, "100")
    p.saw("prod", "emails-worker", before_ours)
    assert (await p.ensure(tq, uid="u")).replicas == 1
    assert fake.calls == {"get": 1, "create": 1}

    # a failed or conflicting write: the next poll reads it again
    p.scaled("prod", "emails-worker", 2, None)
    await p.ensure(tq, uid="u")
    assert fake.calls["get"] == 2

    # deleted: the event drops it, the next poll finds it missing and recreates it
    gone = fake.state()
    assert gone is not None
    fake.body = None
    p.saw("prod", "emails-worker", gone, deleted=True)
    await p.ensure(tq, uid="u")
    assert fake.calls["create"] == 2 and fake.body is not None


async def test_after_the_watch_lists_again_what_it_did_not_show_is_read_once() -> None:
    """kopf lists after a 410 Gone: a Deployment deleted while it was not watching sends no
    event, so a cached state the new listing does not confirm is read again, once."""
    fake, tq, clock = FakeKube(), taskqueue(), Clock()
    fake.body = workload.build_deployment(tq, uid="u", replicas=1)
    p = Deployments(fake, watched=True, clock=clock)  # type: ignore[arg-type]
    p.saw("prod", "emails-worker", fake.state(), listed=True)  # the first listing
    other = kube.DeploymentState(name="other-worker", replicas=0, ready_replicas=0, selector={},
                                 resource_version="1")
    clock.now += 1
    p.saw("prod", "other-worker", other, listed=True)  # the same listing, going on
    clock.now += LISTING_SECONDS
    await p.ensure(tq, uid="u")
    assert fake.calls["get"] == 0

    clock.now += 3600
    p.saw("prod", "other-worker", other, listed=True)  # a new listing
    await p.ensure(tq, uid="u")  # it may not have reached this one yet
    assert fake.calls["get"] == 0
    clock.now += LISTING_SECONDS
    await p.ensure(tq, uid="u")  # it did not show it
    await p.ensure(tq, uid="u")
    assert fake.calls["get"] == 1

    clock.now += 3600
    p.saw("prod", "other-worker", other, listed=True)  # and another, which shows it
    p.saw("prod", "emails-worker", fake.state(), listed=True)
    clock.now += LISTING_SECONDS
    await p.ensure(tq, uid="u")
    assert fake.calls["get"] == 1

    clock.now += 3600
    p.saw("staging", "other-worker", other, listed=True)  # another namespace's listing
    clock.now += LISTING_SECONDS
    await p.ensure(tq, uid="u")
    assert fake.calls["get"] == 1


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
