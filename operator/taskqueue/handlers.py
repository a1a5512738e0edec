"""kopf handlers: thin. Each reads the object, calls the poller (decide + act), reports problems.

- create/resume/update of a TaskQueue's spec: ensure its worker Deployment.
- a daemon per TaskQueue: one poll every spec.scaling.pollIntervalSeconds (intervals per object).
- pod events of worker pods: when a pod is gone, requeue what it held (the reaper).
- events of the Deployments it owns (labelled `taskqueue.dev/taskqueue`): kept in the poller, so
  a poll does not GET the Deployment (`Poller.read_deployment`).

Shared resources (the `Poller`, with its Kubernetes client and Redis pools) live in kopf's memo,
created by `taskqueue.operator_main`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from taskqueue import kube, models, redact, workload
from taskqueue.poller import Memory, Poller, SpecError, parse

log = logging.getLogger("taskqueue.operator")
TQ = (models.GROUP, models.VERSION, models.PLURAL)
ERROR_RETRY_SECONDS = 5.0


def _poller(memo: Any) -> Poller:
    found: Poller = memo.poller
    return found


def _memory(memo: Any, meta: Any) -> Memory:
    memories: dict[tuple[str, str], Memory] = memo.memories
    return memories.setdefault((meta["namespace"], meta["name"]), Memory())


def _ref(meta: Any) -> kube.ObjectRef:
    return kube.ObjectRef(meta["namespace"], meta["name"], meta["uid"])


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    settings.persistence.finalizer = f"{models.GROUP}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=models.GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=models.GROUP, key="last-handled-configuration")
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    _poller(memo).watch_deployments = True


@kopf.on.login()
def login(memo: Any, settings: kopf.OperatorSettings, **_: Any) -> kopf.ConnectionInfo:
    """The same credentials as the poller's client (--kubeconfig, in-cluster, or default)."""
    config = kube.load_configuration(memo.kubeconfig)
    return kopf.ConnectionInfo(
        server=config.host, ca_path=config.ssl_ca_cert, insecure=not config.verify_ssl,
        token=kube.bearer_token(config), certificate_path=config.cert_file,
        private_key_path=config.key_file, trust_env=settings.networking.trust_env,
    )


@kopf.on.resume(*TQ)
@kopf.on.create(*TQ)
@kopf.on.update(*TQ, field="spec")
async def ensure_workload(body: kopf.Body, meta: kopf.Meta, memo: Any, **_: Any) -> None:
    memory = _memory(memo, meta)
    try:
        tq = parse(dict(body))
        await _poller(memo).ensure_workload(tq, uid=meta["uid"])
    except SpecError as e:
        await _poller(memo).report_problem(_ref(meta), memory, str(e), reason="InvalidSpec")


@kopf.daemon(*TQ, cancellation_timeout=10)
async def poll(body: kopf.Body, meta: kopf.Meta, memo: Any, stopped: kopf.DaemonStopped,
               **_: Any) -> None:
    loop = asyncio.get_running_loop()
    memory = _memory(memo, meta)
    memory.status = memory.status or dict(body.get("status") or {}) or None
    while not stopped:
        started = loop.time()
        interval = await poll_once(_poller(memo), body, memory)
        await stopped.wait(max(0.0, interval - (loop.time() - started)))


async def poll_once(poller: Poller, body: kopf.Body, memory: Memory) -> float:
    """One poll; never raises (a bad TaskQueue must not stop the others). Returns the interval."""
    meta = body["metadata"]
    try:
        tq = parse(dict(body))
        await poller.poll(tq, uid=meta["uid"], memory=memory, generation=meta.get("generation"))
        return tq.spec.scaling.pollIntervalSeconds
    except SpecError as e:
        await _report(poller, meta, memory, str(e), "InvalidSpec")
    except Exception as e:  # an API or Redis failure of this TaskQueue only
        problem = f"poll failed: {type(e).__name__}: {redact.scrub(str(e))}"
        log.warning("%s/%s: %s", meta["namespace"], meta["name"], problem)
        await _report(poller, meta, memory, problem, "PollFailed")
    return ERROR_RETRY_SECONDS


async def _report(poller: Poller, meta: Any, memory: Memory, problem: str, reason: str) -> None:
    try:
        await poller.report_problem(_ref(meta), memory, problem, reason=reason)
    except Exception as e:
        log.warning("cannot report %s on %s/%s: %s", reason, meta["namespace"], meta["name"], e)


@kopf.on.delete(*TQ, optional=True)
async def forget(meta: kopf.Meta, memo: Any, **_: Any) -> None:
    memo.memories.pop((meta["namespace"], meta["name"]), None)
    _poller(memo).forget(meta["namespace"], meta["name"])


@kopf.on.event("v1", "pods", labels={workload.TASKQUEUE_LABEL: kopf.PRESENT})
async def reap(event: kopf.RawEvent, body: kopf.Body, meta: kopf.Meta, memo: Any,
               **_: Any) -> None:
    phase = (body.get("status") or {}).get("phase")
    if event["type"] != "DELETED" and phase not in ("Failed", "Succeeded"):
        return
    try:
        await _poller(memo).reap(meta["namespace"], meta["name"],
                                 meta["labels"][workload.TASKQUEUE_LABEL])
    except Exception as e:
        log.warning("could not recover tasks of pod %s/%s: %s", meta["namespace"], meta["name"],
                    redact.scrub(str(e)))


@kopf.on.event("apps", "v1", "deployments", labels={workload.TASKQUEUE_LABEL: kopf.PRESENT})
async def deployment_seen(event: kopf.RawEvent, body: kopf.Body, meta: kopf.Meta, memo: Any,
                          **_: Any) -> None:
    _poller(memo).saw_deployment(meta["namespace"], meta["name"], kube.deployment_state(body),
                                 deleted=event["type"] == "DELETED")
