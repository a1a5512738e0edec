"""The worker's Redis calls: one dedicated connection, the Lua scripts by EVALSHA, no pool.

The connection (`taskqueue.worker.resp`) goes to the master that serves the TaskQueue's keys:
one server, the Cluster node owning the TaskQueue's hash slot, or the master Sentinel names;
after a connection loss, MOVED, READONLY or CLUSTERDOWN it is found again on the next call, which
is how a worker follows a failover.

The dispatcher, each consume slot, the heartbeat and the wake-up listener own one `Store` each,
so a blocking call never waits for another thread. Payloads are decoded as UTF-8 with
`surrogateescape` and encoded back the same way (`resp.pack`), so bytes that are not UTF-8
still travel back to Redis unchanged (acks match exactly). The fetch command, sent once per
wake-up, is mostly pre-encoded.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from taskqueue.telemetry import tally
from taskqueue.wire import keys, scripts
from taskqueue.worker import resp
from taskqueue.worker.resp import bulk, pack

log = logging.getLogger(__name__)
T = TypeVar("T")

WAIT_TIMEOUT_MS = 2000
"""How long durable mode waits for replicas before going on (and logging it)."""

CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError, resp.MovedError, resp.ReadOnlyError, resp.ClusterDownError, resp.TryAgainError,
)
"""Errors after which a call may be retried on a new connection (to the master found again):
no script ran, or the connection broke and the caller's own recovery applies."""
REDIS_ERRORS: tuple[type[BaseException], ...] = (resp.RedisError, *CONNECTION_ERRORS)
"""Every error a Redis call can raise: connection loss and error replies (OOM, BUSY, WRONGTYPE,
READONLY, MISCONF, NOSCRIPT...). Long-lived worker threads retry all of them with backoff."""


def expect(reply: Any, read: Callable[[Any], T], *, what: str) -> T:
    """`read(reply)`, or an `UnexpectedReplyError` naming `what` when the reply has another
    shape than `read` takes."""
    try:
        return read(reply)
    except (TypeError, ValueError, LookupError) as exc:
        raise resp.UnexpectedReplyError(f"{what} replied {reply!r:.200}") from exc


def connect(url: str, *, key: str, protocol: int = 2) -> resp.Connection:
    """A new connection (not yet connected) to the master serving `key`, with the URL's
    settings (auth, TLS, db, topology)."""
    return resp.Connection(resp.Target.from_url(url), key=key, protocol=protocol)


CLOCK_SAMPLES = 8
"""Heartbeat readings the clock estimate chooses from."""


class RedisClock:
    """Unix time on Redis's clock, estimated from this host's clock plus the offset measured at
    the heartbeats (heartbeat.lua returns Redis's TIME). The promoter (due tasks) and the
    deadlines of retries sent to fetch.lua and fail.lua use it, so a host clock that is off does
    not shift them. Of the last `CLOCK_SAMPLES` readings the one answered fastest is used: a
    reading's error is at most half its round trip, and one heartbeat delayed on a loaded host
    would otherwise move every promotion until the next one (early or late by tens of ms)."""

    def __init__(self) -> None:
        self.offset_ms = 0
        self._samples: deque[tuple[float, int]] = deque(maxlen=CLOCK_SAMPLES)

    def observe(self, *, redis_ms: int, sent: float, received: float) -> None:
        """One TIME reading `redis_ms`, asked at `sent` and answered at `received` (time.time())."""
        self._samples.append((received - sent, int(redis_ms - (sent + received) * 500)))
        self.offset_ms = min(self._samples)[1]

    def now_ms(self) -> int:
        return int(time.time() * 1000) + self.offset_ms


CLOCK = RedisClock()
"""The process's estimate of Redis's clock (one Redis per worker process)."""


def now_ms() -> int:
    """Unix ms on Redis's clock (see `RedisClock`)."""
    return CLOCK.now_ms()


class Store:
    """Redis operations of one worker thread over a connection of its own."""

    def __init__(self, *, url: str, schema: keys.KeySchema, worker_id: str,
                 wait_replicas: int = 0, tracking: bool = False) -> None:
        self.schema = schema
        self.tracking = scripts.tracking_arg(schema, tracking=tracking)
        """The task index's key prefix ("" when spec.worker.tracking is off)."""
        self._tracking = bulk(self.tracking)
        self.wait_replicas = wait_replicas
        self.worker_id = worker_id
        self.processing = schema.processing(worker_id)
        self._url = url
        self._conn: resp.Connection | None = None
        self._hold_flag = {True: bulk("1"), False: bulk("0")}
        self.queue_keys: tuple[str, ...] = ()
        self.flow_wait_ms = 0
        """From the last fetch: ms until a rate-limited queue may give its next task (0: none
        held back)."""
        self.use_queues(skip=())

    def use_queues(self, *, skip: Collection[str]) -> None:
        """Take from every queue of the schema but `skip` (keys that hold the wrong type; still
        declared to fetch.lua, so due entries of theirs are judged, not taken for strangers)."""
        schema = self.schema
        self.queue_keys = tuple(k for k in schema.queue_keys if k not in skip)
        fetch_keys = scripts.fetch_keys(schema, self.worker_id)
        # EVALSHA <sha> <numkeys> <keys...> <max> <queue options> | <now> <count> <hold>
        # <tracking> acks...
        head: list[str | int] = ["EVALSHA", scripts.script("fetch").sha, len(fetch_keys),
                                 *fetch_keys, schema.dead_letter_max_length,
                                 scripts.fetch_options(schema, skip=skip)]
        self._fetch_head = b"".join(bulk(a) for a in head)
        self._fetch_fixed = len(head) + 4

    def key_types(self) -> dict[str, str]:
        """The type Redis holds at each key fetch.lua touches ("none" when absent)."""
        names = [self.processing, self.schema.delayed, self.schema.starvation,
                 self.schema.stats, self.schema.dead_letter, *self.schema.queue_keys]
        return {name: str(self.call("TYPE", name)) for name in names}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()

    def _connection(self) -> resp.Connection:
        """The open connection, or a new one to the master of our processing list's slot."""
        if self._conn is None:
            self._conn = connect(self._url, key=self.processing)
        return self._conn

    def send(self, packed: bytes, *, timeout: float | None = None) -> Any:
        """One packed command and its reply (within `timeout` s, else the socket timeout);
        after a connection error, MOVED or READONLY the master is found again and a new
        connection opened on the next call."""
        conn = self._connection()
        try:
            conn.send(packed)
            if timeout is None:
                return conn.read()
            return conn.read(timeout=timeout)
        except CONNECTION_ERRORS:
            self._conn = None
            conn.close()
            raise

    def call(self, *args: Any, timeout: float | None = None) -> Any:
        """One command and its reply."""
        return self.send(pack(args), timeout=timeout)

    def transaction(self, *commands: Sequence[Any]) -> Any:
        """`commands` as one MULTI ... EXEC, sent in one round trip: Redis applies all of them
        or none, so no client sees a key between them and no crash leaves it half written
        (a hash written without its TTL). EXEC's reply. Any error closes the connection: the
        replies still unread would otherwise answer the next call."""
        conn = self._connection()
        try:
            conn.send(b"".join(pack(c) for c in (("MULTI",), *commands, ("EXEC",))))
            for _ in range(len(commands) + 1):  # +OK, then +QUEUED each
                conn.read()
            return conn.read()
        except BaseException:
            self._conn = None
            conn.close()
            raise

    def script(self, name: str, keys_: Sequence[str], args: Sequence[Any]) -> Any:
        packed = pack(["EVALSHA", scripts.script(name).sha, len(keys_), *keys_, *args])
        return self._evalsha(name, packed)

    def _evalsha(self, name: str, packed: bytes) -> Any:
        """`packed` (an EVALSHA of script `name`); on NOSCRIPT the script is loaded and sent
        again. An ACL refusal inside the script raises a NoPermissionError naming the command."""
        return scripts.script(name).on_noscript(
            lambda: self.send(packed), lambda source: self.call("SCRIPT", "LOAD", source),
            noscript=resp.NoScriptError, reply_error=resp.ReplyError,
            refused=resp.NoPermissionError)

    def fetch(self, *, acks: Sequence[str], count: int, hold: bool = True,
              now: int | str = "") -> list[str]:
        """Ack `acks` and take up to `count` entries, held in our processing list with `hold`
        (see fetch.lua). Promotes only with `now` (Redis's clock, ms): the promoter does
        (`promote`). When a rate limit held a queue back, `flow_wait_ms` is the time until it
        may give its next task (else 0)."""
        packed = b"".join((
            b"*%d\r\n" % (self._fetch_fixed + len(acks)), self._fetch_head,
            bulk(now), bulk(count if self.queue_keys else 0), self._hold_flag[hold],
            self._tracking,
            *[bulk(a) for a in acks],
        ))
        result: list[str] = self._evalsha("fetch", packed)
        self.flow_wait_ms = 0
        if result and isinstance(result[-1], int):
            self.flow_wait_ms = result.pop()
            tally.RATE_LIMIT.waited(self.flow_wait_ms)
        if result and self.wait_replicas and hold:
            # durable mode: the move into our processing list reaches a replica before we run
            # the task, so a failover now cannot hand it out again while we hold it
            acked = int(self.call("WAIT", self.wait_replicas, WAIT_TIMEOUT_MS))
            if acked < self.wait_replicas:
                log.warning("WAIT: %d of %d replica(s) confirmed the fetch within %d ms",
                            acked, self.wait_replicas, WAIT_TIMEOUT_MS)
        return result

    def ack(self, acks: Sequence[str], *, held: bool = True) -> None:
        """Ack `acks` (fetch.lua taking nothing); not `held` (AtMostOnce with tracking): they
        are only marked done in the task index."""
        self.fetch(acks=acks, count=0, hold=held)

    def promote(self) -> None:
        """Move the due entries of the delayed zset back to their queues (fetch.lua with COUNT
        0 and Redis's now): the promoter's call (`promoter.py`), the only one that promotes."""
        self.fetch(acks=(), count=0, hold=False, now=now_ms())

    def fail(self, *, entry: str, held: bool, dead: bool, value: str, due_ms: int) -> bool:
        """Retry (`value` = delayed entry) or dead-letter (`value` = record); see fail.lua."""
        s = self.schema
        applied = self.script(
            "fail", [self.processing, s.delayed, s.dead_letter, s.stats, s.flow_state],
            ["1" if held else "0", entry, "dead" if dead else "retry", value, due_ms,
             s.dead_letter_max_length, self.tracking],
        )
        return bool(applied)

    def cancelled(self, *, entry: str, held: bool, task_id: str) -> bool:
        """Finish a running task that was cancelled: out of the processing list, counted, its
        cancel spent; never retried (cancelled.lua). False when it was no longer held."""
        s = self.schema
        return bool(self.script("cancelled", [self.processing, s.stats, s.cancels, s.flow_state],
                                ["1" if held else "0", entry, task_id, self.tracking]))

    def release(self, entries: Sequence[str]) -> int:
        """Give back held entries unrun (attempts unchanged); see release.lua."""
        if not entries:
            return 0
        keys_, args = scripts.release_call(self.schema, self.worker_id, entries,
                                           tracking=bool(self.tracking))
        return int(self.script("release", keys_, args))

    def held_entries(self) -> list[str]:
        result: list[str] = self.call("LRANGE", self.processing, 0, -1)
        return result

    def heartbeat(self, *, window: float, served: Sequence[str | int] = (),
                  running_ms: Sequence[int] = ()) -> tuple[int, list[str]]:
        """Refresh our deadline to Redis's now + `window` seconds, record when the running tasks
        started (`running_ms`: how long each has run, longest first; `servicetime.Totals.
        running_ms`) and add the `served` stats increments (heartbeat.lua;
        `servicetime.Totals.take`); returns Redis's now (unix ms) and the ids of the workers
        whose deadline has passed."""
        reply = self.script("heartbeat", [self.schema.workers, self.schema.stats,
                                          self.schema.started(self.worker_id)],
                            [self.worker_id, int(1000 * window),
                             ",".join(map(str, running_ms)), *served])
        return expect(reply, lambda r: (int(r[0]), [str(w) for w in r[1]]),
                      what="heartbeat.lua")

    def next_due_ms(self) -> float | None:
        """The due time (unix ms) of the earliest entry of the delayed zset; None when empty."""
        head = self.call("ZRANGE", self.schema.delayed, 0, 0, "WITHSCORES")
        return expect(head, lambda h: float(h[1]) if h else None, what="ZRANGE of the delayed set")

    def recover(self, *, worker_id: str, max_attempts: int, reason: str) -> tuple[int, int]:
        """Requeue the tasks of a dead worker (recover.lua; the operator's twin:
        queueops.recover_worker)."""
        keys_, args = scripts.recover_call(
            self.schema, worker_id=worker_id, max_attempts=max_attempts, reason=reason,
            tracking=bool(self.tracking))
        requeued, dead = self.script("recover", keys_, args)
        return int(requeued), int(dead)

    def deregister(self) -> bool:
        """Leave the workers set, unless tasks are still held (then recovery handles them)."""
        if int(self.call("LLEN", self.processing)):
            return False
        self.call("ZREM", self.schema.workers, self.worker_id)
        return True

    def pop_blocking(self, *, zset: bool, timeout: float,
                     paused: Collection[str] = ()) -> str | None:
        """AtMostOnce: BRPOP (lists) or BZPOPMIN (zsets) over the queues in priority order,
        but the `paused` ones (a blocking pop cannot read the flow hashes: `flowwatch`)."""
        queues = tuple(k for k in self.queue_keys if k not in paused)
        if not queues:  # every queue paused or of the wrong type: nothing to wait on
            time.sleep(timeout)
            return None
        if zset:
            got = self.call("BZPOPMIN", *queues, timeout, timeout=timeout + 10)
            return None if not got else keys.Entry(got[0], str(got[2]), got[1]).encode()
        got = self.call("BRPOP", *queues, timeout, timeout=timeout + 10)
        return None if not got else keys.Entry(got[0], "", got[1]).encode()
