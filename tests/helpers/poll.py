"""What one operator poll reads of a TaskQueue, outside kopf: the DSN (`connections.RedisUrls`)
and the observation through the operator's own pools (`taskqueue.observe`)."""

from __future__ import annotations

from taskqueue import models
from taskqueue.observation import QueueObservation
from taskqueue.observe import observe
from taskqueue.poller import Poller


async def observe_taskqueue(poller: Poller,
                            tq: models.TaskQueue) -> tuple[QueueObservation | None, str | None]:
    """The observation of `tq` as a poll makes it (or None and the password-free error)."""
    url = await poller.urls.url(tq)
    return await observe(poller.pools.get(url), url, tq)
