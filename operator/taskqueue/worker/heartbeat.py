"""Registration and recovery: refresh this worker's heartbeat and requeue the tasks of workers
whose heartbeat expired (recover.lua, atomic: two workers recovering one never duplicate).

Runs in its own thread with its own connection, so a handler that holds the consume threads
cannot make the worker look dead, and it keeps beating until the drain on SIGTERM is over.
"""

from __future__ import annotations

import logging
import threading

from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.store import CONNECTION_ERRORS, Store

log = logging.getLogger(__name__)


class Heartbeat:
    """`beat()` once; `start()` to beat every `heartbeat_seconds` until `stop()`."""

    def __init__(self, *, config: WorkerConfig) -> None:
        self.config = config
        self.store = Store(url=config.redis_url, schema=config.schema,
                           worker_id=config.worker_id)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="heartbeat")

    def beat(self) -> int:
        """Refresh our deadline and recover every expired worker; returns tasks requeued."""
        total = 0
        for dead_id in self.store.heartbeat(period=self.config.heartbeat_seconds):
            requeued, dead = self.store.recover(
                worker_id=dead_id, max_attempts=self.config.max_attempts,
                reason=f"heartbeat of {dead_id} expired",
            )
            total += requeued
            log.warning("recovered worker %s: %d task(s) requeued, %d dead-lettered",
                        dead_id, requeued, dead, extra={"worker_id": dead_id})
        return total

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.store.close()

    def _run(self) -> None:
        period = self.config.heartbeat_seconds
        wait = period
        while not self._stop.wait(wait):
            try:
                self.beat()
                wait = period
            except CONNECTION_ERRORS as exc:
                log.warning("heartbeat failed (%s); retrying", exc)
                wait = min(period, 0.5)
