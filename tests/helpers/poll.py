"""What one operator poll reads of a TaskQueue, outside kopf: the DSN (`redisurls.RedisUrls`)
and the observation through the operator's own pools (`taskqueue.controller.observe`)."""

from __future__ import annotations

from taskqueue.api import models
from taskqueue.controller.observe import observe
from taskqueue.controller.poller import Poller
from taskqueue.scaling.observation import QueueObservation


async def observe_taskqueue(poller: Poller,
                            tq: models.TaskQueue) -> tuple[QueueObservation | None, str | None]:
    """The observation of `tq` as a poll makes it (or None and the password-free error)."""
    url = await poller.urls.url(tq)
    return await observe(poller.pools.get(url), url, tq)
