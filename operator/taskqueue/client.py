"""Producer client: `enqueue()` pushes a payload in an envelope the worker unwraps.

A payload is `bytes` (sent byte for byte) or `str` (sent as UTF-8; a str that came from bytes
decoded with `surrogateescape` gives those bytes back, which is how the worker hands a payload
that is not UTF-8 to a handler). The envelope carries the payload's bytes as they are inside its
JSON string, so the handler gets exactly the bytes given (docs/worker.md, "Python API").

Lists get LPUSH (the worker takes the oldest from the right end); zset queues get ZADD with the
priority as score (lowest first, default 0). Envelope ids sort by creation time, so tasks with
equal scores come out FIFO. Raw `LPUSH key payload` from any language works as well.

Options (docs/worker.md, "Scheduled tasks" and "Unique tasks"):
- `delay=` seconds / `at=` unix time or datetime: the task waits in the TaskQueue's delayed zset
  (`<key_prefix>:delayed`) until it is due; the workers promote it within a second of that time.
  `key_prefix` is the TaskQueue's spec.keyPrefix, which defaults to its FIRST queue key: pass it
  when `key` is not the first queue or the TaskQueue sets keyPrefix.
- `wait_replicas=N` (durable mode, spec.redis.waitForReplicas): the push is followed by WAIT on
  the same connection and returns once N replicas have it, else raises NotReplicated (the push
  may be lost if the master fails now: push again); `wait_timeout_ms` bounds the wait.
- `unique_for=` seconds: a second enqueue of the same id within that window is a no-op that
  returns the id (one atomic script, `enqueue.lua`). The id is `task_id`, else the payload's
  `keys.content_id` (same payload, same task).
- `track=True` (for a TaskQueue with spec.worker.tracking): the push goes through `enqueue.lua`,
  which writes the task index's first state (queued, or delayed until due) in the same atomic
  call, so `status(id)` knows the task before a worker takes it; a unique no-op leaves the
  index as it is. `enqueue_many_sync` / `enqueue_many` push untracked in one LPUSH for all; with
  `track=True` each task goes through enqueue.lua, all in one pipelined round trip.

Every number is checked before anything is sent (`ValueError` naming the option and its range).
A push is sent once: `connect()` / `connect_async()` make clients that never re-send a command
after a timeout or a dropped connection (a re-sent LPUSH whose first copy was only late pushes
the task twice); such an error means the push may or may not have happened. Pass `task_id=` and
`unique_for=` to make a push safe to repeat (docs/worker.md, "Python API").

What is sent is decided once, for both transports: `plan` gives each task's `Push`, and a `Send`
holds the calls of one round trip and the WAIT of durable mode; `send` (redis-py) and
`send_async` (redis.asyncio) only carry a `Send` to Redis and hand its replies back.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
import redis.asyncio as aioredis
import redis.asyncio.retry
import redis.retry
from redis.backoff import NoBackoff

from taskqueue.api.limits import Bounds
from taskqueue.redisio import clients, queueops
from taskqueue.wire import keys, lifecycle, scripts

WAIT_TIMEOUT_MS = 2000

Payload = str | bytes
"""A task's payload: bytes, sent as they are, or text (`payload_text`)."""

When = float | datetime
"""A point in time: unix seconds or an aware datetime (a naive one is taken as UTC)."""

MAX_AHEAD_SECONDS = 10 * 365 * 86400
"""How far ahead a task may be scheduled (`delay=`, `at=`), and the longest `unique_for=`."""

DELAY = Bounds(0, MAX_AHEAD_SECONDS, f"seconds from 0 to {MAX_AHEAD_SECONDS} (10 years)")
UNIQUE_FOR = Bounds(0.001, MAX_AHEAD_SECONDS,
                    f"seconds from 0.001 to {MAX_AHEAD_SECONDS} (10 years)")
PRIORITY = Bounds(-math.inf, math.inf, "a finite number (the lowest score runs first)")
WAIT_REPLICAS = Bounds(0, math.inf, "a whole number of replicas >= 0", whole=True)
WAIT_TIMEOUT = Bounds(1, 3_600_000, "whole milliseconds from 1 to 3600000 (WAIT 0 would "
                      "block for ever)", whole=True)


def at_bounds(now: float) -> Bounds:
    """What `at=` accepts at `now`: from the epoch to MAX_AHEAD_SECONDS ahead."""
    return Bounds(0, now + MAX_AHEAD_SECONDS,
                  f"unix seconds (or a datetime) from 0 to {now + MAX_AHEAD_SECONDS:.0f} "
                  "(10 years from now)")


# -- what is sent (pure) ------------------------------------------------------------------------


def payload_text(payload: Payload) -> str:
    """`payload` as the text an element carries: bytes decoded as UTF-8 with `surrogateescape`
    (a byte that is not UTF-8 becomes an escape that `wire` turns back into it); a str as it
    is, when it has bytes (ValueError for a lone surrogate that stands for no byte). Pure."""
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload).decode("utf-8", "surrogateescape")
    if not isinstance(payload, str):
        raise TypeError(f"a payload is str or bytes, not {type(payload).__name__}")
    try:
        wire(payload)
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"payload: {payload[exc.start]!r} at index {exc.start} is a lone surrogate that "
            "stands for no byte; pass the payload as bytes") from None
    return payload


def wire(text: str) -> bytes:
    """The bytes of `text` as sent to Redis: UTF-8, surrogate escapes back to their bytes
    (redis-py's hiredis packer would refuse them). Pure."""
    return text.encode("utf-8", "surrogateescape")


def _task_id(task_id: str | None) -> str | None:
    if task_id is not None and not isinstance(task_id, str):
        raise TypeError(f"task_id is a str, not {type(task_id).__name__}")
    if task_id:
        try:
            task_id.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"task_id={task_id!r} is not UTF-8 text; use a text id") from None
    return task_id


def envelope(payload: Payload, *, task_id: str | None = None,
             trace: dict[str, str] | None = None) -> tuple[str, str]:
    """(task id, element) for `payload`; `trace`: the W3C trace context (`trace_context`)."""
    tid = _task_id(task_id) or keys.new_task_id()
    trace = trace or {}
    return tid, keys.wrap(payload_text(payload), task_id=tid, enqueued_at=time.time(),
                          traceparent=trace.get("traceparent", ""),
                          tracestate=trace.get("tracestate", ""))


def trace_context() -> dict[str, str]:
    """The W3C trace context of the current OpenTelemetry span (`traceparent`, `tracestate`),
    injected by the globally configured propagator; {} when the application has not imported
    OpenTelemetry (nothing is imported here for it) or no span is recording."""
    if "opentelemetry.trace" not in sys.modules:
        return {}
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


def due_ms(*, delay: float | timedelta | None, at: When | None, now: float) -> int | None:
    """The due time in unix ms of a task scheduled by `delay` or `at`; None when neither is set
    or the time is not in the future (the task is pushed at once). ValueError for a number out
    of `DELAY` / `at_bounds`. Pure."""
    if delay is not None and at is not None:
        raise ValueError("give delay= or at=, not both")
    if delay is not None:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
        when = now + DELAY.check("delay", seconds)
    elif at is not None:
        if isinstance(at, datetime):
            at = (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()
        when = at_bounds(now).check("at", at)
    else:
        return None
    return int(when * 1000) if when > now else None


def durability(wait_replicas: int, wait_timeout_ms: int) -> tuple[int, int]:
    """(`wait_replicas`, `wait_timeout_ms`) checked against WAIT_REPLICAS and WAIT_TIMEOUT
    (ValueError naming the option and its range). Pure."""
    replicas = int(WAIT_REPLICAS.check("wait_replicas", wait_replicas))
    return replicas, int(WAIT_TIMEOUT.check("wait_timeout_ms", wait_timeout_ms))


@dataclass(frozen=True)
class ScriptCall:
    """A call of enqueue.lua: its KEYS and ARGV."""

    keys: list[str]
    args: list[str | bytes | int | float]


Call = tuple[Any, ...] | ScriptCall
"""One command of a `Send`: a plain command (`("LPUSH", key, element)`) or enqueue.lua."""


@dataclass(frozen=True)
class Push:
    """How one task is pushed: plain LPUSH/ZADD (`script` False) or through enqueue.lua."""

    task_id: str
    queue_key: str
    target: str
    """The queue, or the delayed zset for a scheduled task."""
    how: str
    """"lpush" | "zadd"."""
    score: float | int
    element: str
    """The element or delayed entry as text (`payload_text`: bytes that are not UTF-8 as
    surrogate escapes); `wire` gives the bytes sent."""
    unique_ms: int
    unique_key: str
    index_key: str = ""
    """The task index hash written with the push (`track`); "" untracked."""

    @property
    def script(self) -> bool:
        return self.unique_ms > 0 or self.target != self.queue_key or bool(self.index_key)

    @property
    def data(self) -> bytes:
        """The element's bytes, as pushed."""
        return wire(self.element)

    @property
    def call(self) -> Call:
        """The command that pushes this task."""
        if self.script:
            index = [self.index_key] if self.index_key else []
            return ScriptCall([self.target, self.unique_key, *index],
                              [self.how, self.score, self.data, self.unique_ms, self.task_id,
                               *([self.queue_key] if index else [])])
        if self.how == "zadd":
            return ("ZADD", self.target, self.score, self.data)
        return ("LPUSH", self.target, self.data)


def plan(key: str, payload: Payload, *, priority: float | None = None,
         task_id: str | None = None, delay: float | timedelta | None = None,
         at: When | None = None, unique_for: float | None = None,
         key_prefix: str | None = None, now: float | None = None, track: bool = False) -> Push:
    """The push of one task with these options; ValueError for an option out of its range
    (nothing is sent then). `track`: enqueue.lua writes the task index's first state with the
    push (queued, or delayed until its due time). Pure apart from the clock/id when not
    given."""
    now = time.time() if now is None else now
    text = payload_text(payload)
    if priority is not None:
        priority = PRIORITY.check("priority", priority)
    if unique_for is not None:
        unique_for = UNIQUE_FOR.check("unique_for", unique_for)
    tid = _task_id(task_id) or (keys.content_id(text) if unique_for else keys.new_task_id())
    due = due_ms(delay=delay, at=at, now=now)
    # a scheduled task is queued from its due time: its wait (and its age in the queue) starts
    # then, not when it was scheduled
    trace = trace_context()
    element = keys.wrap(text, task_id=tid,
                        enqueued_at=now if due is None else max(now, due / 1000),
                        traceparent=trace.get("traceparent", ""),
                        tracestate=trace.get("tracestate", ""))
    prefix = key_prefix or key
    schema = keys.KeySchema(prefix=prefix, queues=(), dead_letter="")
    unique_ms = max(1, int(unique_for * 1000)) if unique_for else 0
    index_key = schema.task(tid) if track else ""
    if due is not None:
        score = "" if priority is None else repr(float(priority))
        entry = keys.Entry(queue=key, score=score, element=element).encode()
        return Push(task_id=tid, queue_key=key, target=schema.delayed, how="zadd", score=due,
                    element=entry, unique_ms=unique_ms, unique_key=schema.unique(tid),
                    index_key=index_key)
    return Push(task_id=tid, queue_key=key, target=key,
                how="lpush" if priority is None else "zadd", score=priority or 0,
                element=element, unique_ms=unique_ms, unique_key=schema.unique(tid),
                index_key=index_key)


class NotReplicated(redis.RedisError):
    """Durable mode: fewer replicas than asked confirmed a push in time (it may still be lost
    if the master fails now; push again or treat the task as not enqueued)."""


@dataclass(frozen=True)
class Send:
    """The calls of one round trip, all on keys of one TaskQueue (one hash slot), and in durable
    mode (`replicas` > 0) a WAIT after them on the same connection."""

    calls: tuple[Call, ...]
    key: str
    """A key of the calls: on a cluster, its node takes a durable send (WAIT counts the
    replicas of the connection's own writes)."""
    replicas: int = 0
    timeout_ms: int = WAIT_TIMEOUT_MS

    @classmethod
    def of(cls, pushes: Sequence[Push], *, replicas: int = 0,
           timeout_ms: int = WAIT_TIMEOUT_MS) -> Send:
        """The send of `pushes` (one TaskQueue's, at least one)."""
        return cls(tuple(p.call for p in pushes), pushes[0].target, replicas, timeout_ms)

    @property
    def wait(self) -> tuple[Any, ...] | None:
        """The WAIT that follows the calls in durable mode."""
        return ("WAIT", self.replicas, self.timeout_ms) if self.replicas else None

    def replies(self, raw: Sequence[Any]) -> list[Any]:
        """The calls' replies from the round trip's (`raw`: WAIT's last in durable mode);
        NotReplicated when fewer replicas than asked confirmed them. Pure."""
        if self.wait is None:
            return list(raw)
        acked = raw[-1]
        if isinstance(acked, Exception):
            raise acked
        if int(acked) < self.replicas:
            raise NotReplicated(f"{acked} of {self.replicas} replica(s) confirmed the push to "
                                f"{self.key} within {self.timeout_ms} ms")
        return list(raw[:-1])


def _one(key: str, payload: Payload, *, priority: float | None, task_id: str | None,
         delay: float | timedelta | None, at: When | None, unique_for: float | None,
         key_prefix: str | None, wait_replicas: int, wait_timeout_ms: int,
         track: bool = False) -> tuple[str, Send]:
    """(task id, send) of `enqueue_sync` and `enqueue`; ValueError before anything is sent."""
    push = plan(key, payload, priority=priority, task_id=task_id, delay=delay, at=at,
                unique_for=unique_for, key_prefix=key_prefix, track=track)
    replicas, timeout_ms = durability(wait_replicas, wait_timeout_ms)
    return push.task_id, Send.of([push], replicas=replicas, timeout_ms=timeout_ms)


def _many(key: str, payloads: Sequence[Payload], *, priority: float | None,
          wait_replicas: int, wait_timeout_ms: int, track: bool = False,
          key_prefix: str | None = None) -> tuple[list[str], Send | None]:
    """(task ids, send) of `enqueue_many_sync` and `enqueue_many`: one LPUSH (ZADD with
    `priority`) of every payload, in order; with `track`, one enqueue.lua call per payload
    (`plan`), in order, in one round trip; no send for no payload. ValueError before anything
    is sent."""
    if priority is not None:
        priority = PRIORITY.check("priority", priority)
    replicas, timeout_ms = durability(wait_replicas, wait_timeout_ms)
    if track:
        pushes = [plan(key, p, priority=priority, key_prefix=key_prefix, track=True)
                  for p in payloads]
        if not pushes:
            return [], None
        return ([p.task_id for p in pushes],
                Send.of(pushes, replicas=replicas, timeout_ms=timeout_ms))
    trace = trace_context()
    pairs = [envelope(p, trace=trace) for p in payloads]
    if not pairs:
        return [], None
    elements = [wire(e) for _, e in pairs]
    call: Call = (("LPUSH", key, *elements) if priority is None else
                  ("ZADD", key, *(a for e in elements for a in (priority, e))))
    return [t for t, _ in pairs], Send((call,), key, replicas, timeout_ms)


# -- how it is sent: redis-py, redis.asyncio --------------------------------------------------


def sent_once(options: dict[str, Any], *, asyncio: bool = False) -> dict[str, Any]:
    """redis-py options for a client that sends each command once: no automatic retry after
    a timeout or a lost connection (the command may have run: a second LPUSH would push the
    task twice). The caller sees the error; the next command reconnects. A `retry` in
    `options` is kept."""
    out = dict(options)
    if "retry" not in out:
        retry_class: Any = redis.asyncio.retry.Retry if asyncio else redis.retry.Retry
        out["retry"] = retry_class(NoBackoff(), 0)
        out.setdefault("retry_on_error", [])
    return out


def connect(url: str, **options: Any) -> redis.Redis:
    """A producer client for any DSN the project accepts (see `taskqueue.redisio.clients`) that
    sends each push once (`sent_once`)."""
    return clients.sync_client(clients.RedisSettings.from_dsn(url), **sent_once(options))


def connect_async(url: str, **options: Any) -> aioredis.Redis:
    """An asyncio producer client for any DSN the project accepts, sending each push once."""
    return clients.async_client(clients.RedisSettings.from_dsn(url),
                                **sent_once(options, asyncio=True))


def _call(target: Any, call: Call) -> Any:
    """Send `call` through `target` (a client, or a pipeline that queues it): the reply, the
    pipeline, or with redis.asyncio an awaitable of either."""
    if isinstance(call, ScriptCall):
        script = target.register_script(scripts.lua("enqueue"))
        return script(keys=call.keys, args=call.args, client=target)
    return target.execute_command(*call)


def _explained(reply: Any) -> Any:
    """`reply`, or for an ACL refusal inside enqueue.lua a NoPermissionError naming the command
    and the rule to add (Redis names only the script line)."""
    if isinstance(reply, redis.ResponseError):
        return queueops.script("enqueue").explain(reply)
    return reply


def _direct(send_: Send) -> bool:
    """One call without WAIT goes without a pipeline (a pipeline asks SCRIPT EXISTS before a
    script: a round trip more)."""
    return send_.wait is None and len(send_.calls) == 1


def send(client: redis.Redis, send_: Send, *, raise_on_error: bool = True) -> list[Any]:
    """Send `send_` in one round trip; the calls' replies (an error reply in its place when
    not `raise_on_error`), NotReplicated when durable mode was not confirmed."""
    if _direct(send_):
        try:
            return [_call(client, send_.calls[0])]
        except redis.ResponseError as exc:
            if raise_on_error:
                raise _explained(exc) from exc
            return [_explained(exc)]
    node = _owner(client, send_.key) if send_.wait else client
    pipe = node.pipeline(transaction=False)
    for call in (*send_.calls, *([send_.wait] if send_.wait else [])):
        _call(pipe, call)
    try:
        raw = pipe.execute(raise_on_error=raise_on_error)
    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) as exc:
        if node is not client:  # a failover moved the slot: learn the new map, then retry
            cluster: Any = client
            cluster.nodes_manager.initialize()
        if isinstance(exc, redis.ResponseError):
            raise _explained(exc) from exc
        raise
    return [_explained(r) for r in send_.replies(raw)]


async def send_async(client: aioredis.Redis, send_: Send) -> list[Any]:
    """The asyncio `send` (error replies raise)."""
    if _direct(send_):
        return [await _call(client, send_.calls[0])]
    node, owned = await _owner_async(client, send_.key) if send_.wait else (client, None)
    try:
        pipe = node.pipeline(transaction=False)
        for call in (*send_.calls, *([send_.wait] if send_.wait else [])):
            queued = _call(pipe, call)
            if isinstance(call, ScriptCall):  # an asyncio script queues once awaited
                await queued
        raw = await pipe.execute()
    finally:
        if owned is not None:
            await owned.aclose()
    return send_.replies(raw)


def _owner(client: Any, key: str) -> Any:
    """The client to push `key` on: the node that owns it on a cluster (WAIT must follow the
    push on the same connection, and all keys of a TaskQueue share one hash tag), else `client`."""
    if hasattr(client, "get_node_from_key"):
        return client.get_node_from_key(key).redis_connection
    return client


async def _owner_async(client: Any, key: str) -> tuple[Any, Any]:
    """(client to push `key` on, the connection opened for it or None): on a cluster a client
    of its own to the node that owns the key, closed by the caller."""
    if not hasattr(client, "get_node_from_key"):
        return client, None
    await client.initialize()  # a no-op once the slot map is known
    node = client.get_node_from_key(key)
    owned = aioredis.Redis(connection_pool=aioredis.ConnectionPool(
        connection_class=node.connection_class, **{
            k: v for k, v in node.connection_kwargs.items() if k != "event_dispatcher"}))
    return owned, owned


def enqueue_sync(client: redis.Redis, key: str, payload: Payload, *,
                 priority: float | None = None, task_id: str | None = None,
                 delay: float | timedelta | None = None, at: When | None = None,
                 unique_for: float | None = None, key_prefix: str | None = None,
                 wait_replicas: int = 0, wait_timeout_ms: int = WAIT_TIMEOUT_MS,
                 track: bool = False) -> str:
    """Push one task; a `priority` makes it a ZADD to a zset queue. Returns the task id (also
    when `unique_for` found it already enqueued). See the module doc for the options; `track`
    writes the task index's first state (spec.worker.tracking, `taskqueue status`) in the same
    atomic call (enqueue.lua), only when the task is pushed."""
    tid, one = _one(key, payload, priority=priority, task_id=task_id, delay=delay, at=at,
                    unique_for=unique_for, key_prefix=key_prefix, wait_replicas=wait_replicas,
                    wait_timeout_ms=wait_timeout_ms, track=track)
    send(client, one)
    return tid


async def enqueue(client: aioredis.Redis, key: str, payload: Payload, *,
                  priority: float | None = None, task_id: str | None = None,
                  delay: float | timedelta | None = None, at: When | None = None,
                  unique_for: float | None = None, key_prefix: str | None = None,
                  wait_replicas: int = 0, wait_timeout_ms: int = WAIT_TIMEOUT_MS,
                  track: bool = False) -> str:
    """The asyncio `enqueue_sync`."""
    tid, one = _one(key, payload, priority=priority, task_id=task_id, delay=delay, at=at,
                    unique_for=unique_for, key_prefix=key_prefix, wait_replicas=wait_replicas,
                    wait_timeout_ms=wait_timeout_ms, track=track)
    await send_async(client, one)
    return tid


def enqueue_many_sync(client: redis.Redis, key: str, payloads: Sequence[Payload], *,
                      priority: float | None = None, wait_replicas: int = 0,
                      wait_timeout_ms: int = WAIT_TIMEOUT_MS, track: bool = False,
                      key_prefix: str | None = None) -> list[str]:
    """Push many tasks in one command (LPUSH or ZADD), in order. Returns their ids. Every
    payload and option is checked before anything is sent.

    `wait_replicas` (durable mode) returns only once that many replicas have the push, and
    raises NotReplicated when they do not confirm it in time. `track` (spec.worker.tracking)
    writes each task's index with its push (enqueue.lua per task, as `enqueue_sync(track=)`),
    all in one round trip; `key_prefix` as for `enqueue_sync`."""
    ids, many = _many(key, payloads, priority=priority, wait_replicas=wait_replicas,
                      wait_timeout_ms=wait_timeout_ms, track=track, key_prefix=key_prefix)
    if many is not None:
        send(client, many)
    return ids


async def enqueue_many(client: aioredis.Redis, key: str, payloads: Sequence[Payload], *,
                       priority: float | None = None, wait_replicas: int = 0,
                       wait_timeout_ms: int = WAIT_TIMEOUT_MS, track: bool = False,
                       key_prefix: str | None = None) -> list[str]:
    """The asyncio `enqueue_many_sync`."""
    ids, many = _many(key, payloads, priority=priority, wait_replicas=wait_replicas,
                      wait_timeout_ms=wait_timeout_ms, track=track, key_prefix=key_prefix)
    if many is not None:
        await send_async(client, many)
    return ids


# -- one task by id: status and cancel (taskqueue.wire.lifecycle) ----------------------------


def _schema(key_prefix: str) -> keys.KeySchema:
    return keys.KeySchema(prefix=key_prefix, queues=(), dead_letter="")


def status_sync(client: redis.Redis, task_id: str, *, key_prefix: str) -> lifecycle.TaskStatus:
    """Where task `task_id` of the TaskQueue with spec.keyPrefix `key_prefix` is (one call of
    status.lua; `taskqueue.wire.lifecycle`)."""
    schema = _schema(key_prefix)
    keys_, args = lifecycle.status_call(schema, task_id)
    reply = queueops.script("status").sync(client, keys=keys_, args=args)
    return lifecycle.read_status(task_id, reply, processing_prefix=schema.processing_prefix)


async def status(client: aioredis.Redis, task_id: str, *,
                 key_prefix: str) -> lifecycle.TaskStatus:
    """`status_sync` on an asyncio client."""
    schema = _schema(key_prefix)
    keys_, args = lifecycle.status_call(schema, task_id)
    reply = await queueops.script("status")(client, keys=keys_, args=args)
    return lifecycle.read_status(task_id, reply, processing_prefix=schema.processing_prefix)


def cancel_sync(client: redis.Redis, task_id: str, *,
                key_prefix: str) -> lifecycle.CancelResult:
    """Cancel task `task_id` (cancel.lua): queued or delayed, it is never run; running, its
    worker stops it within a second. Never retried; counted in the stats' `cancelled`."""
    keys_, args = lifecycle.cancel_call(_schema(key_prefix), task_id)
    reply = queueops.script("cancel").sync(client, keys=keys_, args=args)
    return lifecycle.read_cancel(task_id, reply)


async def cancel(client: aioredis.Redis, task_id: str, *,
                 key_prefix: str) -> lifecycle.CancelResult:
    """`cancel_sync` on an asyncio client."""
    keys_, args = lifecycle.cancel_call(_schema(key_prefix), task_id)
    reply = await queueops.script("cancel")(client, keys=keys_, args=args)
    return lifecycle.read_cancel(task_id, reply)
