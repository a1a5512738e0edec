"""kopf handlers: thin. Each reads the object and calls the poller (observe, decide, act).

- a daemon per TaskQueue: one poll every spec.scaling.pollIntervalSeconds (intervals per object);
  the poll is the one place the worker Deployment is created or updated.
- create/resume/update of a TaskQueue's spec: wake its daemon, so a new spec is acted on at once.
- pod events of worker pods: when a pod is gone, requeue what it held (the reaper).
- events of the Deployments it owns (labelled `taskqueue.dev/taskqueue`), the listing's
  included: kept by the poller's `Deployments`, so a poll does not GET the Deployment.

The shared `Poller` (Kubernetes client, Redis pools) is in kopf's memo, created by
`taskqueue.controller.main`; each TaskQueue's `Record` is in kopf's per-object memo. When the
operator is sharded (`memo.shards`), every replica runs a daemon per TaskQueue but polls, and
reaps pods, only for the TaskQueues it owns (`taskqueue.controller.shards`); on taking one over
it starts from the TaskQueue's status, as after a restart.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from taskqueue.api import models, redact
from taskqueue.controller import kube, workload
from taskqueue.controller.poller import Poller
from taskqueue.controller.record import Record, SpecError
from taskqueue.controller.shards import Shards
from taskqueue.telemetry import metrics

log = logging.getLogger("taskqueue.operator")
TQ = (models.GROUP, models.VERSION, models.PLURAL)
ERROR_RETRY_SECONDS = 5.0
SHARD_CHECK_SECONDS = 30.0
"""The longest a sharded replica's daemon of a TaskQueue it does not own sleeps without checking
again (it wakes when `Shards.changed` says ownership may have changed)."""


def _poller(memo: Any) -> Poller:
    found: Poller = memo.poller
    return found


def record_of(memo: Any, meta: Any) -> Record:
    """The TaskQueue's record, kept in its kopf per-object memo (created on first use)."""
    found: Record | None = getattr(memo, "record", None)
    if found is None:
        found = memo.record = _poller(memo).record(meta["namespace"], meta["name"])
        found.uid = meta["uid"]
    return found


def owns(memo: Any, uid: str) -> bool:
    """Whether this replica acts on the TaskQueue of `uid` (always, unless sharded)."""
    shards: Shards | None = getattr(memo, "shards", None)
    return shards is None or shards.owns(uid)


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
    _poller(memo).deployments.watched = True


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
async def spec_changed(meta: kopf.Meta, memo: Any, **_: Any) -> None:
    record_of(memo, meta).wake.set()


@kopf.daemon(*TQ, cancellation_timeout=10)
async def poll(body: kopf.Body, meta: kopf.Meta, memo: Any, stopped: kopf.DaemonStopped,
               **_: Any) -> None:
    loop = asyncio.get_running_loop()
    record = record_of(memo, meta)
    owned = False
    due: float | None = None
    while not stopped:
        if not owns(memo, meta["uid"]):
            if owned:
                _poller(memo).release(record)
            owned = False
            record.wake.clear()
            await _sleep(stopped, record.wake, SHARD_CHECK_SECONDS, memo.shards.changed())
            continue
        if not owned:
            _poller(memo).take_over(record, body.get("status"))
            owned = True
            due = None
        started = loop.time()
        if due is not None and not record.wake.is_set():  # a spec change polls early
            metrics.POLL_LAG.observe(max(0.0, started - due))
        record.wake.clear()
        interval = await poll_once(_poller(memo), body, record)
        due = started + interval
        await _sleep(stopped, record.wake, max(0.0, interval - (loop.time() - started)))


async def _sleep(stopped: kopf.DaemonStopped, wake: asyncio.Event, seconds: float,
                 *also: asyncio.Event) -> None:
    """Until `seconds` have passed, the daemon is stopped, the spec changed (or `also` is set)."""
    waits = {asyncio.ensure_future(stopped.wait()), asyncio.ensure_future(wake.wait()),
             *(asyncio.ensure_future(e.wait()) for e in also)}
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def poll_once(poller: Poller, body: kopf.Body, record: Record) -> float:
    """One poll; never raises (a bad TaskQueue must not stop the others). Returns the interval."""
    meta = body["metadata"]
    try:
        tq = poller.parse(record, body)
        await poller.poll(tq, record=record, uid=meta["uid"], generation=meta.get("generation"))
        return tq.spec.scaling.pollIntervalSeconds
    except SpecError as e:
        await _report(poller, meta, record, str(e), "InvalidSpec")
    except Exception as e:  # an API or Redis failure of this TaskQueue only
        problem = f"poll failed: {type(e).__name__}: {redact.scrub(str(e))}"
        log.warning("%s/%s: %s", meta["namespace"], meta["name"], problem)
        await _report(poller, meta, record, problem, "PollFailed")
    return ERROR_RETRY_SECONDS


async def _report(poller: Poller, meta: Any, record: Record, problem: str, reason: str) -> None:
    try:
        await poller.report_problem(_ref(meta), record, problem, reason=reason)
    except Exception as e:
        log.warning("cannot report %s on %s/%s: %s", reason, meta["namespace"], meta["name"], e)


@kopf.on.delete(*TQ, optional=True)
async def forget(meta: kopf.Meta, memo: Any, **_: Any) -> None:
    _poller(memo).forget(record_of(memo, meta))


@kopf.on.event("v1", "pods", labels={workload.TASKQUEUE_LABEL: kopf.PRESENT})
async def reap(event: kopf.RawEvent, body: kopf.Body, meta: kopf.Meta, memo: Any,
               **_: Any) -> None:
    phase = (body.get("status") or {}).get("phase")
    if event["type"] != "DELETED" and phase not in ("Failed", "Succeeded"):
        return
    record = _poller(memo).records.get(meta["namespace"], meta["labels"][workload.TASKQUEUE_LABEL])
    if record is not None and record.uid and not owns(memo, record.uid):
        return  # another replica's TaskQueue: it reaps
    try:
        await _poller(memo).reaper.reap(meta["namespace"], meta["name"],
                                        meta["labels"][workload.TASKQUEUE_LABEL])
    except Exception as e:
        log.warning("could not recover tasks of pod %s/%s: %s", meta["namespace"], meta["name"],
                    redact.scrub(str(e)))


@kopf.on.event("apps", "v1", "deployments", labels={workload.TASKQUEUE_LABEL: kopf.PRESENT})
async def deployment_seen(event: kopf.RawEvent, body: kopf.Body, meta: kopf.Meta, memo: Any,
                          **_: Any) -> None:
    _poller(memo).deployments.saw(meta["namespace"], meta["name"], kube.deployment_state(body),
                                  deleted=event["type"] == "DELETED", listed=event["type"] is None)
