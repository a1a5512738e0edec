"""The worker's Redis calls: one dedicated connection, the Lua scripts by EVALSHA, no pool.

The connection goes to the master that serves the TaskQueue's keys (`taskqueue.connection`:
one server, the Cluster node owning the TaskQueue's hash slot, or the master Sentinel names);
after a connection loss, MOVED, READONLY or CLUSTERDOWN it is found again on the next call, which
is how a worker follows a failover.

Each consume slot, the heartbeat and the wake-up listener own one `Store` each, so a blocking
call never waits for another thread. Payloads are decoded as UTF-8 with `surrogateescape` and
encoded back the same way by our own command packer (redis-py's hiredis packer would reject
them), so bytes that are not UTF-8 still travel back to Redis unchanged (acks match exactly).
The fetch command, sent once per task, is mostly pre-encoded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from redis.exceptions import (
    ClusterDownError,
    MovedError,
    ReadOnlyError,
    TryAgainError,
)

import redis
from taskqueue import connection, keys, queueops

log = logging.getLogger(__name__)

WAIT_TIMEOUT_MS = 2000
"""How long durable mode waits for replicas before going on (and logging it)."""

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError, redis.TimeoutError, OSError, MovedError, ReadOnlyError,
    ClusterDownError, TryAgainError,
)
"""Errors after which a call may be retried on a new connection (to the master found again):
no script ran, or the connection broke and the caller's own recovery applies."""


def connect(url: str, *, key: str, protocol: int = 2) -> Any:
    """A new raw connection (not yet connected) to the master serving `key`, with the URL's
    settings (auth, TLS, db, topology)."""
    return connection.node_connection(
        connection.RedisSettings.from_dsn(url), key=key, decode_responses=True,
        encoding_errors="surrogateescape", protocol=protocol, socket_connect_timeout=5,
        socket_timeout=30, socket_keepalive=True,
    )


def now_ms() -> int:
    return int(time.time() * 1000)


def bulk(value: str | bytes | int | float) -> bytes:
    """One RESP bulk string; `str` is encoded as UTF-8 with surrogateescape."""
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogateescape")
    elif isinstance(value, bytes):
        data = value
    elif isinstance(value, int):
        data = b"%d" % value
    else:
        data = repr(float(value)).encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


def pack(args: Sequence[str | bytes | int | float]) -> bytes:
    """A RESP command."""
    return b"*%d\r\n" % len(args) + b"".join(bulk(a) for a in args)


class Store:
    """Redis operations of one worker thread over a connection of its own."""

    def __init__(self, *, url: str, schema: keys.KeySchema, worker_id: str,
                 wait_replicas: int = 0) -> None:
        self.schema = schema
        self.wait_replicas = wait_replicas
        self.worker_id = worker_id
        self.processing = schema.processing(worker_id)
        self._url = url
        self._conn: Any = None
        queue_args: list[str] = []
        for q in schema.queues:
            queue_args += [q.type, "" if q.starvation_limit is None else str(q.starvation_limit)]
        fetch_keys = queueops.fetch_keys(schema, worker_id)
        self._release_keys = queueops.release_keys(schema, worker_id)
        # EVALSHA <sha> <numkeys> <keys...> | now count hold nacks acks... | queue args...
        head: list[str | int] = ["EVALSHA", queueops.script("fetch").sha, len(fetch_keys),
                                 *fetch_keys]
        self._fetch_head = b"".join(bulk(a) for a in head)
        self._fetch_tail = b"".join(bulk(a) for a in queue_args)
        self._fetch_fixed = 3 + len(fetch_keys) + 4 + len(queue_args)
        self._hold_flag = {True: bulk("1"), False: bulk("0")}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.disconnect()

    def send(self, packed: bytes, *, timeout: float | None = None) -> Any:
        """One packed command and its reply; after a connection error, MOVED or READONLY the
        master is found again and a new connection opened on the next call."""
        if self._conn is None:
            self._conn = connect(self._url, key=self.processing)
        try:
            self._conn.send_packed_command([packed], check_health=False)
            if timeout is None:
                return self._conn.read_response()
            return self._conn.read_response(timeout=timeout)
        except CONNECTION_ERRORS:
            conn, self._conn = self._conn, None
            conn.disconnect()
            raise

    def call(self, *args: Any, timeout: float | None = None) -> Any:
        """One command and its reply."""
        return self.send(pack(args), timeout=timeout)

    def script(self, name: str, keys_: Sequence[str], args: Sequence[Any]) -> Any:
        packed = pack(["EVALSHA", queueops.script(name).sha, len(keys_), *keys_, *args])
        return self._evalsha(name, packed)

    def _evalsha(self, name: str, packed: bytes) -> Any:
        return queueops.script(name).on_noscript(
            lambda: self.send(packed), lambda source: self.call("SCRIPT", "LOAD", source))

    def fetch(self, *, acks: Sequence[str], count: int, hold: bool = True,
              promote: bool = True) -> list[str]:
        """Ack `acks`, promote due retries (unless `promote` is False), take up to `count`
        entries (see fetch.lua)."""
        packed = b"".join((
            b"*%d\r\n" % (self._fetch_fixed + len(acks)), self._fetch_head,
            bulk(now_ms() if promote else ""), bulk(count), self._hold_flag[hold],
            bulk(len(acks)), *[bulk(a) for a in acks], self._fetch_tail,
        ))
        result: list[str] = self._evalsha("fetch", packed)
        if result and self.wait_replicas and hold:
            # durable mode: the move into our processing list reaches a replica before we run
            # the task, so a failover now cannot hand it out again while we hold it
            acked = int(self.call("WAIT", self.wait_replicas, WAIT_TIMEOUT_MS))
            if acked < self.wait_replicas:
                log.warning("WAIT: %d of %d replica(s) confirmed the fetch within %d ms",
                            acked, self.wait_replicas, WAIT_TIMEOUT_MS)
        return result

    def fail(self, *, entry: str, held: bool, dead: bool, value: str, due_ms: int) -> bool:
        """Retry (`value` = delayed entry) or dead-letter (`value` = record); see fail.lua."""
        s = self.schema
        applied = self.script(
            "fail", [self.processing, s.delayed, s.dead_letter, s.stats],
            ["1" if held else "0", entry, "dead" if dead else "retry", value, due_ms],
        )
        return bool(applied)

    def release(self, entries: Sequence[str]) -> int:
        """Give back held entries unrun (attempts unchanged); see release.lua."""
        if not entries:
            return 0
        return int(self.script("release", self._release_keys, list(entries)))

    def held_entries(self) -> list[str]:
        result: list[str] = self.call("LRANGE", self.processing, 0, -1)
        return result

    def heartbeat(self, *, period: float) -> list[str]:
        """Refresh our deadline (now + 3 periods); return the ids of expired workers."""
        now = now_ms()
        expired: list[str] = self.script(
            "heartbeat", [self.schema.workers],
            [self.worker_id, now + int(3000 * period), now],
        )
        return expired

    def recover(self, *, worker_id: str, max_attempts: int, reason: str) -> tuple[int, int]:
        """Requeue the tasks of a dead worker (recover.lua, as queueops.recover_worker)."""
        keys_, args = queueops.recover_call(
            self.schema, worker_id=worker_id, max_attempts=max_attempts, reason=reason
        )
        requeued, dead = self.script("recover", keys_, args)
        return int(requeued), int(dead)

    def deregister(self) -> bool:
        """Leave the workers set, unless tasks are still held (then recovery handles them)."""
        if int(self.call("LLEN", self.processing)):
            return False
        self.call("ZREM", self.schema.workers, self.worker_id)
        return True

    def pop_blocking(self, *, zset: bool, timeout: float) -> str | None:
        """AtMostOnce: BRPOP (lists) or BZPOPMIN (zsets) over the queues in priority order."""
        queues = self.schema.queue_keys
        if zset:
            got = self.call("BZPOPMIN", *queues, timeout, timeout=timeout + 10)
            return None if not got else keys.Entry(got[0], got[2], got[1]).encode()
        got = self.call("BRPOP", *queues, timeout, timeout=timeout + 10)
        return None if not got else keys.Entry(got[0], "", got[1]).encode()
