"""One worker process: registration, the consume slots, the wake-up listener, the heartbeat,
and the drain on stop. Usable in-process (tests, benchmarks): `start()`, `stop()`, `join()`.

Drain: stop taking tasks, let the tasks in hand finish within the grace period, give back the
prefetched ones and whatever could not finish (attempts unchanged), then leave the workers set
(only when nothing is held any more; otherwise the heartbeat expires and recovery requeues).
"""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from types import FrameType

from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.handlers import Handler
from taskqueue.worker.heartbeat import Heartbeat
from taskqueue.worker.idempotency import LeaseKeeper, Leases
from taskqueue.worker.promoter import Promoter
from taskqueue.worker.slot import Slot, fetch_mode
from taskqueue.worker.state import WorkerState
from taskqueue.worker.store import CONNECTION_ERRORS, Store
from taskqueue.worker.wakeup import Wakeup

log = logging.getLogger(__name__)


class Worker:
    """The threads of one worker process."""

    def __init__(self, config: WorkerConfig, *, handler: Handler) -> None:
        self.config = config
        self.state = WorkerState()
        mode = fetch_mode(config)
        self.wakeup = (Wakeup(url=config.redis_url, queue_keys=config.schema.queue_keys)
                       if mode in ("held", "unheld") else None)
        self.heartbeat = Heartbeat(config=config)
        self.promoter = Promoter(config=config, stopping=self.state.stopping)
        leases = Leases() if config.idempotency_window is not None else None
        self.lease_keeper = (LeaseKeeper(config=config, leases=leases)
                             if leases is not None else None)
        self.slots = [Slot(config=config, handler=handler, state=self.state,
                           wakeup=self.wakeup, index=i, leases=leases)
                      for i in range(config.concurrency)]
        self.stopped = threading.Event()

    def start(self) -> None:
        """Register (requeueing what an earlier process with our id left), then consume."""
        self._register()
        if self.wakeup is not None:
            self.wakeup.start()
        self.heartbeat.start()
        self.promoter.start()
        if self.lease_keeper is not None:
            self.lease_keeper.start()
        for slot in self.slots:
            slot.thread.start()
        log.info("worker %s consuming %s (%s, concurrency %d, prefetch %d)",
                 self.config.worker_id, ", ".join(self.config.schema.queue_keys),
                 self.config.delivery, self.config.concurrency, self.config.prefetch,
                 extra={"worker_id": self.config.worker_id})

    def _register(self) -> None:
        delay = 0.05
        while not self.state.stopping.is_set():
            try:
                requeued, dead = self.heartbeat.store.recover(
                    worker_id=self.config.worker_id, max_attempts=self.config.max_attempts,
                    reason=f"worker {self.config.worker_id} restarted")
                if requeued or dead:
                    log.warning("requeued %d task(s) left by an earlier run of %s", requeued,
                                self.config.worker_id)
                self.heartbeat.beat()
                return
            except CONNECTION_ERRORS as exc:
                log.warning("cannot reach Redis (%s); retrying in %.2fs", exc, delay)
                self.state.stopping.wait(delay * random.uniform(0.5, 1))
                delay = min(delay * 2, 5.0)

    def stop(self) -> None:
        """Stop taking tasks (idle slots return at once); `join()` drains."""
        self.state.stopping.set()
        if self.wakeup is not None:
            self.wakeup.stop()

    def join(self, *, grace: float | None = None) -> None:
        """Wait for the slots up to the grace period, give back the rest, deregister."""
        deadline = time.monotonic() + (self.config.grace_seconds if grace is None else grace)
        for slot in self.slots:
            if slot.thread.is_alive():
                slot.thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [slot for slot in self.slots if slot.thread.is_alive()]
        if stuck:
            self._give_back_stuck(stuck)
        self.heartbeat.stop()
        if self.lease_keeper is not None:
            self.lease_keeper.stop()
        self._deregister()
        self.stopped.set()

    def _give_back_stuck(self, stuck: list[Slot]) -> None:
        store = Store(url=self.config.redis_url, schema=self.config.schema,
                      worker_id=self.config.worker_id)
        try:
            acks = [a for slot in stuck for a in slot.acks]
            if acks:
                store.fetch(acks=acks, count=0)
                self.state.unhold(acks)
            # only the stuck slots hold entries now: give back all that is left
            n = store.release(store.held_entries())
            log.warning("grace period over: gave back %d unfinished task(s)", n)
        except CONNECTION_ERRORS as exc:
            log.error("could not give back unfinished tasks (%s); recovery will", exc)
        finally:
            store.close()

    def _deregister(self) -> None:
        store = Store(url=self.config.redis_url, schema=self.config.schema,
                      worker_id=self.config.worker_id)
        try:
            if not store.deregister():
                log.warning("tasks still held: leaving the heartbeat to expire for recovery")
        except CONNECTION_ERRORS as exc:
            log.warning("could not deregister (%s); the heartbeat will expire", exc)
        finally:
            store.close()

    def run_until_signal(self) -> int:
        """start(), then drain on SIGTERM/SIGINT; the exit status (0)."""
        got = threading.Event()

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log.info("signal %d: draining", signum)
            got.set()
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self.start()
        while not got.wait(1.0):
            pass
        self.join()
        log.info("worker %s stopped", self.config.worker_id)
        return 0
