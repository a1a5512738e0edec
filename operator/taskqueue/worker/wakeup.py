"""Idle wake-up: a RESP3 connection with `CLIENT TRACKING ON BCAST PREFIX <queue>...`.

Redis pushes an `invalidate` message naming the key on every write to a tracked key, so an idle
worker learns of an LPUSH/ZADD to one of its queues within a fraction of a millisecond, without
polling. The push only wakes the consume threads; the task itself is taken by the atomic fetch
script. Waiters also wake every `sweep` seconds (missed pushes, due retries), and everyone wakes
after the listener reconnects (writes during the outage sent no push).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from taskqueue.worker.store import CONNECTION_ERRORS, connection_pool

log = logging.getLogger(__name__)


def tracking_prefixes(queue_keys: Iterable[str]) -> list[str]:
    """The queue keys without any that another one prefixes (Redis rejects overlapping ones)."""
    ordered = sorted(set(queue_keys))
    return [k for k in ordered if not any(k != p and k.startswith(p) for p in ordered)]


class Wakeup:
    """A generation counter bumped on every push that names one of the queue keys."""

    def __init__(self, *, url: str, queue_keys: Iterable[str]) -> None:
        self._url = url
        self._keys = frozenset(queue_keys)
        self._cond = threading.Condition()
        self._gen = 0
        self._stopped = False
        self._thread = threading.Thread(target=self._listen, daemon=True, name="wakeup")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def generation(self) -> int:
        return self._gen

    def bump(self) -> None:
        with self._cond:
            self._gen += 1
            self._cond.notify_all()

    def wait(self, since: int, *, timeout: float) -> None:
        """Until a push after generation `since`, stop(), or `timeout` seconds."""
        with self._cond:
            self._cond.wait_for(lambda: self._gen != since or self._stopped, timeout)

    def _listen(self) -> None:
        delay = 0.05
        while not self._stopped:
            try:
                self._session()
            except CONNECTION_ERRORS as exc:
                log.warning("wake-up listener lost Redis (%s); reconnecting in %.2fs", exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
            else:
                delay = 0.05

    def _session(self) -> None:
        conn: Any = connection_pool(self._url, protocol=3).make_connection()
        try:
            conn.connect()
            conn._parser.set_invalidation_push_handler(lambda msg: msg)
            args = [arg for p in tracking_prefixes(self._keys) for arg in ("PREFIX", p)]
            conn.send_command("CLIENT", "TRACKING", "ON", "BCAST", *args)
            conn.read_response()
            self.bump()  # anything written while we were not listening
            while not self._stopped:
                if conn.can_read(timeout=0.5):
                    self._on_push(conn.read_response(push_request=True))
        finally:
            conn.disconnect()

    def _on_push(self, msg: Any) -> None:
        if not isinstance(msg, list) or len(msg) < 2 or msg[0] != "invalidate":
            return
        touched = msg[1]
        if touched is None or any(k in self._keys for k in touched):
            self.bump()
