"""What one operator poll reads of a TaskQueue, outside kopf: the DSN (`redisurls.RedisUrls`)
and the observation through the operator's own pools (`taskqueue.controller.observe`)."""

from __future__ import annotations

from collections.abc import Sequence

from taskqueue.api import models
from taskqueue.controller.observe import observe
from taskqueue.controller.poller import Poller
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import history, keys


async def observe_taskqueue(poller: Poller, tq: models.TaskQueue, *,
                            appends: Sequence[history.Append] = (),
                            ) -> tuple[QueueObservation | None, str | None]:
    """The observation of `tq` as a poll makes it (or None and the password-free error; an
    append Redis refused counts as an error too)."""
    url = await poller.urls.url(tq)
    observed = await observe(poller.pools.get(url), url, tq, keys.KeySchema.from_spec(tq.spec),
                             appends=appends)
    return observed.observation, observed.error or "; ".join(observed.refused) or None
