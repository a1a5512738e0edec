"""The poller's Deployment cache (fed by the Deployment watch) and its status-write throttle."""

from __future__ import annotations

from collections import Counter
from typing import Any

from taskqueue import kube, manifest, models, poller, workload
from taskqueue.kube import DeploymentState


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


async def test_watched_deployment_is_not_read_on_every_poll() -> None:
    fake, tq = FakeKube(), taskqueue()
    p = poller.Poller(kube=fake, watch_deployments=True)  # type: ignore[arg-type]
    await p.ensure_workload(tq, uid="u")  # missing: GET, create
    assert fake.calls == {"get": 1, "create": 1}
    await p.ensure_workload(tq, uid="u")  # our own write: read again
    assert fake.calls["get"] == 2
    for _ in range(poller.DEPLOYMENT_REFRESH_POLLS - 1):
        assert (await p.ensure_workload(tq, uid="u")).replicas == 0
    assert fake.calls["get"] == 2 and fake.calls["create"] == 1

    # scaled by hand: the watch event brings the new replicas, no GET
    assert fake.body is not None
    fake.body["spec"]["replicas"] = 3
    p.saw_deployment("prod", "emails-worker", fake.state())
    assert (await p.ensure_workload(tq, uid="u")).replicas == 3
    assert fake.calls["get"] == 2

    # the safety net: a GET after DEPLOYMENT_REFRESH_POLLS polls without an event
    for _ in range(poller.DEPLOYMENT_REFRESH_POLLS):
        await p.ensure_workload(tq, uid="u")
    assert fake.calls["get"] == 3

    # deleted: the event drops it, the next poll recreates it
    gone = fake.state()
    assert gone is not None
    fake.body = None
    p.saw_deployment("prod", "emails-worker", gone, deleted=True)
    await p.ensure_workload(tq, uid="u")
    assert fake.calls["create"] == 2 and fake.body is not None


async def test_without_the_watch_every_poll_reads_and_scale_targets_always_do() -> None:
    fake = FakeKube()
    fake.body = workload.build_deployment(taskqueue(), uid="u", replicas=1)
    p = poller.Poller(kube=fake)  # type: ignore[arg-type]
    for _ in range(3):
        await p.ensure_workload(taskqueue(), uid="u")
    assert fake.calls["get"] == 3
    p.watch_deployments = True
    target = taskqueue(scaleTargetRef={"name": "emails-worker"})
    p.saw_deployment("prod", "emails-worker", fake.state())
    for _ in range(3):
        await p.ensure_workload(target, uid="u")
    assert fake.calls["get"] == 6


async def test_a_changed_spec_hash_rewrites_the_cached_deployment() -> None:
    fake = FakeKube()
    p = poller.Poller(kube=fake, watch_deployments=True)  # type: ignore[arg-type]
    await p.ensure_workload(taskqueue(), uid="u")
    p.saw_deployment("prod", "emails-worker", fake.state())
    await p.ensure_workload(taskqueue(worker={"handler": "pkg.mod:other"}), uid="u")
    assert fake.calls["replace"] == 1


async def test_a_watch_event_older_than_our_write_is_ignored() -> None:
    fake, tq = FakeKube(), taskqueue()
    p = poller.Poller(kube=fake, watch_deployments=True)  # type: ignore[arg-type]
    p.targets[("prod", "emails")] = poller.Target(tq, "u", "")
    await p.ensure_workload(tq, uid="u")  # created at resourceVersion "2"
    created = await p.ensure_workload(tq, uid="u")  # GET, kept
    old = kube.DeploymentState(**{**created.__dict__, "replicas": 5, "resource_version": "1"})
    p.saw_deployment("prod", "emails-worker", old)
    assert (await p.ensure_workload(tq, uid="u")).replicas == 0
    p._wrote_deployment("prod", "emails-worker", "10")  # e.g. our scale to 2
    p.saw_deployment("prod", "emails-worker",
                     kube.DeploymentState(**{**old.__dict__, "resource_version": "9"}))
    calls = fake.calls["get"]
    await p.ensure_workload(tq, uid="u")
    assert fake.calls["get"] == calls + 1  # the stale event was not used
    new = kube.DeploymentState(**{**old.__dict__, "replicas": 2, "resource_version": "10"})
    p.saw_deployment("prod", "emails-worker", new)
    assert (await p.ensure_workload(tq, uid="u")).replicas == 2


def test_drift_only_and_restart_slack() -> None:
    old = {"totalBacklog": 4, "oldestTaskAgeSeconds": 10, "lastActiveTime": "2026-01-01T00:00:00Z"}
    assert poller.drift_only(old, {**old, "oldestTaskAgeSeconds": 15,
                                   "lastActiveTime": "2026-01-01T00:00:05Z"})
    assert not poller.drift_only(old, {**old, "totalBacklog": 3})
    assert not poller.drift_only(None, old)
    idle = {**old, "totalBacklog": 0}
    del idle["oldestTaskAgeSeconds"]
    assert not poller.drift_only(old, idle)
    at = poller.from_iso("2026-01-01T00:00:00Z")
    assert at is not None
    assert poller.initial_state(old, slack=20).last_active == at + 20
    assert poller.initial_state(idle, slack=20).last_active == at
