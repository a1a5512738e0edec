"""Redis operations on a TaskQueue through redis-py, shared by the operator and the CLI.

Reads a whole observation in one round trip (`observe`; `observe_appending` sends the operator's
history appends in the same round trip, and `observe_polling` the read of the flow hashes too:
the operator's poll) and requeues a departed worker's tasks atomically
(`recover_worker`). The scripts and key names come from `taskqueue.wire.keys`, the calls'
KEYS and ARGV from `taskqueue.wire.scripts`, which the worker uses without redis-py.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import redis
from redis.exceptions import NoPermissionError, NoScriptError

from taskqueue.redisio import flowops
from taskqueue.scaling.observation import QueueObservation, WorkerObservation, WrongType
from taskqueue.wire import history, keys, scripts

if TYPE_CHECKING:  # redis.asyncio is loaded where an asyncio client is made
    import redis.asyncio as aioredis

_SEEN_WORKERS_MAX = 4096
_seen_workers: OrderedDict[str, tuple[str, ...]] = OrderedDict()
"""Worker ids last seen per workers-zset key: observe passes their processing lists in KEYS up
front, so a poll stays one round trip while the fleet is unchanged (a hint only: a wrong one
costs a second call, never a wrong answer)."""


class Script(scripts.Script):
    """A Lua script run through a redis-py client (asyncio, or `sync`), loaded again on
    NOSCRIPT.
    The one script loader of the operator and the CLI (the worker sends the same scripts over
    its own connection: `taskqueue.wire.scripts`).

    One instance per script name, shared by every client: nothing here refers to a client, so
    clients are never kept alive by the cache nor confused with a later client at the same id.
    """

    async def __call__(self, client: aioredis.Redis, *, keys: Sequence[Any] = (),
                       args: Sequence[Any] = ()) -> Any:
        try:
            try:
                return await client.evalsha(self.sha, len(keys), *keys, *args)
            except NoScriptError:
                await client.script_load(self.source)
                return await client.evalsha(self.sha, len(keys), *keys, *args)
        except redis.ResponseError as exc:
            raise self.explain(exc) from exc

    def sync(self, client: redis.Redis, *, keys: Sequence[Any] = (),
             args: Sequence[Any] = ()) -> Any:
        """The same call on a synchronous client (the CLI's `status` and `cancel`)."""
        return self.on_noscript(
            lambda: client.evalsha(self.sha, len(keys), *keys, *args), client.script_load,
            noscript=NoScriptError, reply_error=redis.ResponseError, refused=NoPermissionError)

    def explain(self, exc: redis.ResponseError) -> redis.ResponseError:
        """`exc`, or when the ACL refused a command inside this script, a NoPermissionError
        naming the command and the rule to add."""
        refused = self.refusal(str(exc))
        return exc if refused is None else NoPermissionError(refused)


@cache
def script(name: str) -> Script:
    """The shared `Script` for `taskqueue/wire/lua/<name>.lua`: `await script(name)(client,
    keys=..., args=...)`."""
    return Script(name)


def _text(value: Any) -> str:
    """A reply value as text; bytes that are not UTF-8 (a worker id someone wrote by hand) as
    surrogate escapes, so they go back to Redis as they came (`_wire`)."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


def wire(values: Sequence[Any]) -> list[Any]:
    """KEYS or ARGV with every text as its exact bytes (`_text` in reverse)."""
    return [v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v for v in values]


def observe_call(schema: keys.KeySchema, worker_ids: Sequence[str], *, horizon_ms: int | None = None
                 ) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of observe.lua (its reply: `keys.OBSERVE_REPLY`), declaring the processing
    lists and started strings of `worker_ids`; delayed entries due by `horizon_ms` (unix ms)
    count as due soon."""
    return (
        [schema.workers, schema.delayed, schema.dead_letter, schema.stats, schema.quiesced,
         *schema.queue_keys, *(schema.processing(w) for w in worker_ids),
         *(schema.started(w) for w in worker_ids)],
        [len(schema.queues), len(schema.queue_counter_fields), *(q.type for q in schema.queues),
         *schema.queue_counter_fields,
         "" if horizon_ms is None else horizon_ms, *worker_ids],
    )


def _missing_workers(raw: Any) -> tuple[str, ...] | None:
    """All worker ids of an observe.lua reply when some processing list was not declared."""
    flat = raw[3]
    ids = tuple(_text(flat[i]) for i in range(0, len(flat), WORKER_FIELDS))
    if any(int(flat[i + 2]) < 0 for i in range(0, len(flat), WORKER_FIELDS)):
        return ids
    return None


def _remember(schema: keys.KeySchema, raw: Any) -> None:
    flat = raw[3]
    _seen_workers[schema.workers] = tuple(_text(flat[i]) for i in range(0, len(flat), 3))
    _seen_workers.move_to_end(schema.workers)
    while len(_seen_workers) > _SEEN_WORKERS_MAX:
        _seen_workers.popitem(last=False)


async def observe(client: aioredis.Redis, schema: keys.KeySchema, *,
                  due_within: float = 0.0) -> QueueObservation:
    """Queue lengths, in-flight per worker, delayed, dead-letter, counters, per-queue taken
    counters, the quiesced workers and the scheduled tasks: one EVALSHA (two when the set of
    workers changed since the last call for this TaskQueue). Delayed tasks due within
    `due_within` seconds from now are counted as `due_soon`."""
    observation, _ = await observe_appending(client, schema, due_within=due_within)
    return observation


async def observe_appending(
    client: aioredis.Redis, schema: keys.KeySchema, *, due_within: float = 0.0,
    appends: Sequence[history.Append] = (),
) -> tuple[QueueObservation, tuple[redis.RedisError | None, ...]]:
    """`observe`, with `appends` (XADD ... MAXLEN ~) sent before it in the same round trip (one
    pipeline, no transaction). The observation is read whatever the appends do; each one Redis
    refused (NOPERM, WRONGTYPE, ...) is returned in its place, None where it was written."""
    observation, refused, _ = await observe_polling(client, schema, due_within=due_within,
                                                    appends=appends, flow=False)
    return observation, refused


async def observe_polling(
    client: aioredis.Redis, schema: keys.KeySchema, *, due_within: float = 0.0,
    appends: Sequence[history.Append] = (), flow: bool = True,
) -> tuple[QueueObservation, tuple[redis.RedisError | None, ...], list[Any] | None]:
    """`observe_appending`, with the read of both flow hashes (`flowops.read_pipe`) in the same
    round trip when `flow`: the operator's poll reads all it needs from Redis in one round trip
    (two when the set of workers changed). The third item is those reads' replies for
    `flowops.hashes` (None without `flow`)."""
    at = time.time()
    horizon = int((at + due_within) * 1000)
    call = script("observe")
    keys_, args = observe_call(schema, _seen_workers.get(schema.workers, ()), horizon_ms=horizon)
    refused: tuple[redis.RedisError | None, ...] = ()
    flow_replies: list[Any] | None = None
    if appends or flow:
        raw, refused, flow_replies = await _append_and_call(
            client, appends, call, wire(keys_), wire(args), flow_of=schema if flow else None)
    else:
        raw = await call(client, keys=wire(keys_), args=wire(args))
    missing = _missing_workers(raw)
    if missing is not None:
        keys_, args = observe_call(schema, missing, horizon_ms=horizon)
        raw = await call(client, keys=wire(keys_), args=wire(args))
    _remember(schema, raw)
    return parse_observation(raw, schema, at=at), refused, flow_replies


async def _append_and_call(
    client: aioredis.Redis, appends: Sequence[history.Append], call: Script,
    keys_: Sequence[Any], args: Sequence[Any], *, flow_of: keys.KeySchema | None = None,
) -> tuple[Any, tuple[redis.RedisError | None, ...], list[Any] | None]:
    """The XADDs of `appends`, the flow reads of `flow_of` (when given), then `call`'s EVALSHA,
    in one pipeline: the script's reply, each XADD's refusal (None: written) and the flow reads'
    replies. A script not loaded (NOSCRIPT) is loaded and run again."""
    async with client.pipeline(transaction=False) as pipe:
        for a in appends:
            pipe.xadd(a.key, {k: v for k, v in a.fields.items()}, maxlen=a.maxlen,
                      approximate=True)
        if flow_of is not None:
            flowops.read_pipe(pipe, flow_of)
        # execute_command: redis-py's cluster pipeline refuses its evalsha method, not the command
        # (routed by its first key: every key of a TaskQueue is in one slot)
        pipe.execute_command("EVALSHA", call.sha, len(keys_), *keys_, *args)
        *replies, raw = await pipe.execute(raise_on_error=False)
    added = replies[:len(appends)]
    flow_replies = replies[len(appends):] if flow_of is not None else None
    if isinstance(raw, NoScriptError):
        raw = await call(client, keys=keys_, args=args)
    elif isinstance(raw, redis.ResponseError):
        raise call.explain(raw) from raw
    elif isinstance(raw, BaseException):
        raise raw
    return (raw, tuple(r if isinstance(r, redis.RedisError) else None for r in added),
            flow_replies)


def _counters(schema: keys.KeySchema, raw: Any) -> dict[str, int]:
    """Per-queue integer counters of an observe.lua reply; fields never written are left out."""
    return {q.key: int(_text(v)) for q, v in zip(schema.queues, raw, strict=False)
            if _text(v).isdigit()}


def _waited(schema: keys.KeySchema, raw: Any) -> dict[str, tuple[int, ...]]:
    """Per queue, the wait histogram workers reported (`keys.wait_fields`: the count, then the
    tasks over each edge; a field never written is 0); queues with none are left out."""
    size = len(keys.WAIT_EDGES_SECONDS) + 1
    out = {}
    for i, q in enumerate(schema.queues):
        fields = [_text(v) for v in raw[i * size:(i + 1) * size]]
        if fields and fields[0].isdigit():
            out[q.key] = tuple(int(v) if v.isdigit() else 0 for v in fields)
    return out


def _time(text: str) -> float | None:
    """A positive finite unix time, else None (unknown)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


_DEADLINE_BOUND = 2.0 ** 62
"""Deadlines beyond this many ms (inf: a member someone wrote by hand) are held at it."""


def _deadline_ms(text: str) -> int:
    """A heartbeat deadline (a zset score: any double, inf included) as whole milliseconds."""
    return int(max(-_DEADLINE_BOUND, min(float(text), _DEADLINE_BOUND)))


_STARTED = re.compile(r"[0-9]{1,15}(,[0-9]{1,15})*")
WORKER_FIELDS = 4
"""observe.lua's fields per worker: id, deadline (ms), processing length, started."""


def _started(text: str) -> tuple[int, ...]:
    """A started string ("ms,ms,...", heartbeat.lua) as start times, oldest first; anything
    that is not a list of integers (a value written by hand) as none."""
    if not _STARTED.fullmatch(text):
        return ()
    return tuple(sorted(int(p) for p in text.split(",")))


def _wrong_types(flat: Any) -> tuple[WrongType, ...]:
    return tuple(WrongType(key=_text(flat[i]), held=_text(flat[i + 1]),
                           expected=_text(flat[i + 2])) for i in range(0, len(flat), 3))


def parse_observation(raw: Any, schema: keys.KeySchema, *, at: float) -> QueueObservation:
    """The observe.lua reply as a `QueueObservation` (a worker not declared counts 0)."""
    lengths, oldest, counters, flat_workers, per_queue, quiesced, scheduled, wrong = raw
    backlog = {q.key: int(n) for q, n in zip(schema.queues, lengths, strict=True)}
    # "" (no envelope time) and 0 (raw payloads recover.lua wrapped) mean unknown
    oldest_at: dict[str, float] = {}
    for q, t in zip(schema.queues, oldest, strict=True):
        enqueued_at = _time(_text(t))
        if enqueued_at is not None:
            oldest_at[q.key] = enqueued_at
    workers = tuple(
        WorkerObservation(
            worker_id=_text(flat_workers[i]),
            deadline_ms=_deadline_ms(_text(flat_workers[i + 1])),
            in_flight=max(0, int(flat_workers[i + 2])),
            started_ms=_started(_text(flat_workers[i + 3])),
        )
        for i in range(0, len(flat_workers), WORKER_FIELDS)
    )
    n = len(schema.queues)
    taken = _counters(schema, per_queue[:n])
    ms, served = _counters(schema, per_queue[n:2 * n]), _counters(schema, per_queue[2 * n:3 * n])
    squares, counted = _counters(schema, per_queue[3 * n:4 * n]), _counters(schema,
                                                                            per_queue[4 * n:5 * n])
    return QueueObservation(
        at=at,
        taken=taken if len(taken) == n else {},
        service={q: (ms[q] / 1000, served[q]) for q in served if q in ms},
        service_sq={q: (squares[q] / 1e6, counted[q]) for q in counted if q in squares},
        waited=_waited(schema, per_queue[5 * n:len(per_queue) - n]),
        limited=_counters(schema, per_queue[len(per_queue) - n:]),
        quiesced=frozenset(schema.worker_of(k) for k in map(_text, quiesced)
                           if k.startswith(schema.processing_prefix)),
        backlog=backlog,
        delayed=int(counters[0]),
        dead_letter=int(counters[1]),
        completed_total=int(counters[2]),
        failed_total=int(counters[3]),
        dead_letter_trimmed_total=int(counters[4]) if len(counters) > 4 else 0,
        workers=workers,
        oldest_enqueued_at=oldest_at,
        due_soon=int(scheduled[0]),
        next_due_at=float(_text(scheduled[1])) / 1000 if _text(scheduled[1]) else None,
        duplicates_total=int(scheduled[2]),
        cancelled_total=int(scheduled[3]) if len(scheduled) > 3 else 0,
        wrong_types=_wrong_types(wrong),
    )


async def quiesce(client: aioredis.Redis, schema: keys.KeySchema, *, add: Sequence[str],
                  remove: Sequence[str]) -> dict[str, int]:
    """Quiesce workers `add`, release `remove`, then read the processing-list length of each
    of `add`, in one MULTI/EXEC: a length read here is final, a quiesced worker takes nothing."""
    async with client.pipeline(transaction=True) as pipe:
        if add:
            pipe.sadd(schema.quiesced, *wire([schema.processing(w) for w in add]))
        if remove:
            pipe.srem(schema.quiesced, *wire([schema.processing(w) for w in remove]))
        for key in wire([schema.processing(w) for w in add]):
            pipe.llen(key)
        try:
            replies = await pipe.execute()
        except redis.ResponseError as exc:
            raise transaction_error(exc) from exc
    lengths = replies[len(replies) - len(add):] if add else []
    return {w: int(n) for w, n in zip(add, lengths, strict=True)}


def transaction_error(exc: redis.ResponseError) -> redis.ResponseError:
    """`exc`, or a NoPermissionError naming the command when the ACL refused MULTI (redis-py
    then reports `EXEC without MULTI`) or EXEC (an ExecAbortError carrying NOPERM)."""
    text = str(exc)
    if "EXEC without MULTI" in text:
        return NoPermissionError("this user has no permissions to run the 'multi' command")
    if "NOPERM" in text:
        return NoPermissionError(text.split("NOPERM ", 1)[1])
    return exc


async def recover_worker(
    client: aioredis.Redis, schema: keys.KeySchema, *, worker_id: str, max_attempts: int,
    reason: str, tracking: bool = False,
) -> tuple[int, int]:
    """Requeue every task `worker_id` holds; returns (requeued, dead-lettered). Atomic.
    `tracking` (spec.worker.tracking): each task's index says where it went."""
    keys_, args = scripts.recover_call(
        schema, worker_id=worker_id, max_attempts=max_attempts, reason=reason,
        tracking=tracking)
    requeued, dead = await script("recover")(client, keys=keys_, args=args)
    return int(requeued), int(dead)
