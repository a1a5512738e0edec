"""Registration and recovery: refresh this worker's heartbeat and requeue the tasks of workers
whose heartbeat expired (recover.lua, atomic: two workers recovering one never duplicate).

Runs in its own thread with its own connection, so a handler that holds the consume threads
cannot make the worker look dead, and it keeps beating until the drain on SIGTERM is over.

Deadlines are kept on Redis's clock (heartbeat.lua calls TIME), so no worker clock matters.
A live peer still looks dead right after an outage (nobody could beat during it), so this
worker judges peers only after beating on time for a grace period (`Judge`): after its own
failed or late beat, peers get the same chance to beat first. The thread is a `periodic.Periodic`:
a Redis error is logged and retried with backoff (at most one period, so that a live worker
beats within a period of Redis coming back), and the runner watches it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from taskqueue.wire import keys
from taskqueue.worker import backoff, servicetime
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.periodic import Periodic
from taskqueue.worker.store import CLOCK, REDIS_ERRORS, Store

log = logging.getLogger(__name__)

DEADLINE_PERIODS = keys.HEARTBEAT_DEADLINE_PERIODS
"""A worker is dead once this many heartbeat periods pass without a beat."""
LATE_PERIODS = 2
"""A beat answered more than this many periods after the previous one counts as an outage."""


@dataclass
class Judge:
    """Whether this worker may judge peers dead now. Pure: times are passed in (monotonic).

    Peers are judged only after `grace` seconds of beats on time. A failed beat, or one that
    succeeds more than `late_after` seconds after the previous success (Redis paused, a network
    outage, this process stopped), restarts the grace period: peers were most likely cut off as
    long as we were, and each beats again within one period of Redis coming back."""

    grace: float
    late_after: float
    healthy_since: float | None = None
    last_ok: float | None = None

    def beat_ok(self, now: float) -> bool:
        """Record a successful beat at `now`; True when peers may be judged."""
        late = self.last_ok is None or now - self.last_ok > self.late_after
        if late or self.healthy_since is None:
            self.healthy_since = now
        self.last_ok = now
        return now - self.healthy_since >= self.grace

    def beat_failed(self) -> None:
        self.last_ok = None


def judge_for(period: float) -> Judge:
    """The grace rule of a worker beating every `period` seconds."""
    return Judge(grace=DEADLINE_PERIODS * period, late_after=LATE_PERIODS * period)


class Heartbeat:
    """`beat()` once; `loop.start()` to beat every `heartbeat_seconds` until `stop()`."""

    def __init__(self, *, config: WorkerConfig) -> None:
        self.config = config
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id, tracking=config.tracking)
        self.judge = judge_for(config.heartbeat_seconds)
        period = config.heartbeat_seconds
        self.loop = Periodic(name="heartbeat", what="beat", step=self._step,
                             stop=threading.Event(), first_wait=period,
                             cap=min(backoff.CAP_SECONDS, period))

    def beat(self) -> int:
        """Refresh our deadline and, outside the grace period, recover every expired worker;
        returns tasks requeued. Raises on a failed heartbeat (the grace period restarts)."""
        period = self.config.heartbeat_seconds
        sent = time.time()
        totals = servicetime.of(self.config.worker_id)
        served = totals.take()
        try:
            redis_ms, expired = self.store.heartbeat(window=DEADLINE_PERIODS * period,
                                                     served=served, running_ms=totals.running_ms())
        except BaseException:
            totals.give_back(served)
            self.judge.beat_failed()
            raise
        CLOCK.observe(redis_ms=redis_ms, sent=sent, received=time.time())
        if not self.judge.beat_ok(time.monotonic()):
            if expired:
                log.info("not judging %d expired worker(s) yet: grace period after an outage "
                         "or start-up", len(expired))
            return 0
        return sum(self._recover(dead_id) for dead_id in expired)

    def _recover(self, dead_id: str) -> int:
        try:
            requeued, dead = self.store.recover(
                worker_id=dead_id, max_attempts=self.config.max_attempts,
                reason=f"heartbeat of {dead_id} expired",
            )
        except REDIS_ERRORS as exc:
            log.warning("heartbeat: recovering worker %s failed (%s); retrying next beat",
                        dead_id, backoff.describe(exc), extra={"worker_id": dead_id})
            return 0
        log.warning("recovered worker %s: %d task(s) requeued, %d dead-lettered",
                    dead_id, requeued, dead, extra={"worker_id": dead_id})
        return requeued

    def stop(self) -> None:
        self.loop.halt()
        self.store.close()

    def _step(self) -> float:
        self.beat()
        return self.config.heartbeat_seconds
