"""The reaper: when a worker pod is gone, requeue what it held at once (atomically, in Lua),
instead of waiting for its heartbeat to expire."""

from __future__ import annotations

import logging

from taskqueue.api import manifest, models
from taskqueue.controller.kube import Kube, ObjectRef
from taskqueue.controller.record import Records
from taskqueue.controller.redisurls import RedisPools, RedisUrls
from taskqueue.redisio import queueops
from taskqueue.wire import keys

log = logging.getLogger("taskqueue.operator")


class Reaper:
    """Recovers the tasks of departed worker pods (one per operator)."""

    def __init__(self, kube: Kube, pools: RedisPools, urls: RedisUrls, records: Records) -> None:
        self.kube = kube
        self.pools = pools
        self.urls = urls
        self.records = records

    async def reap(self, namespace: str, pod: str, taskqueue: str) -> tuple[int, int]:
        """Requeue what worker `pod` held, atomically; returns (requeued, dead-lettered)."""
        tq, uid, url = await self._target(namespace, taskqueue)
        requeued, dead = await queueops.recover_worker(
            self.pools.get(url), keys.KeySchema.from_spec(tq.spec), worker_id=pod,
            max_attempts=tq.spec.retry.maxAttempts, reason=f"pod {namespace}/{pod} gone",
            tracking=tq.spec.worker.tracking)
        if requeued or dead:
            message = f"pod {pod} is gone: requeued {requeued} task(s), dead-lettered {dead}"
            log.info("%s/%s: %s", namespace, taskqueue, message)
            await self.kube.event(ObjectRef(namespace, taskqueue, uid), type="Normal",
                                  reason="RecoveredTasks", message=message)
        return requeued, dead

    async def _target(self, namespace: str, name: str) -> tuple[models.TaskQueue, str, str]:
        """The TaskQueue's spec, uid and Redis URL: from its record once polled, else the API."""
        record = self.records.get(namespace, name)
        if record is not None and record.tq is not None and record.url:
            return record.tq, record.uid, record.url
        body = await self.kube.get_taskqueue(namespace, name)
        tq = manifest.parse(body)
        return tq, str(body["metadata"]["uid"]), await self.urls.url(tq)
