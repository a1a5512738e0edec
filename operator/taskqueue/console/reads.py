"""The console's Redis reads, each bounded: no page load scans a key.

A list queue shows its next tasks from the right end (served next), a zset queue its lowest
scores (ZPOPMIN), the delayed zset its earliest due entries; dead letters come a page at a time
(LRANGE of one page, newest first) and a search reads at most `SEARCH_WINDOW` of the newest
records. The history and the decision log are read through `taskqueue.wire.history` (one XRANGE
from the last entry seen, one XREVRANGE of the newest decisions), in the same pipeline as the
flow-control hashes (`redisio.flowops`) and the schedules' firing record (one HMGET of the
spec's schedule names). A worker's held tasks come with its progress hash (`ctx.progress`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

from taskqueue.cli.records import DeadLetter, printable
from taskqueue.redisio import flowops
from taskqueue.wire import flow, history, keys, lifecycle

if TYPE_CHECKING:
    import redis.asyncio as aioredis

PENDING_SHOWN = 50
"""Tasks shown per queue, and delayed entries shown."""
DEAD_PAGE = 25
"""Dead-letter records per page."""
SEARCH_WINDOW = 2000
"""The newest dead-letter records a search reads."""
DECISIONS_SHOWN = 50
"""Newest decision-log entries shown."""
HISTORY_POINTS = 4000
"""History points read per refresh at most (an hour at the shortest interval, 1 s, is 3600)."""
HELD_SHOWN = 20
"""Tasks shown per worker."""
WORKERS_SHOWN = 200
"""Workers whose held tasks are read at most in one read."""
WORKERS_PAGE = 50
"""Workers per page of the workers table (the TaskQueue page shows the first page)."""


@dataclass(frozen=True)
class Pending:
    """A task waiting in a queue or the delayed set."""

    task: keys.Task
    score: float | None = None
    """Its zset score (priority, or due unix ms in the delayed set); None in a list."""
    queue: str = ""
    """The queue a delayed entry goes to."""


async def pending(client: aioredis.Redis, queue: keys.QueueRef, *,
                  limit: int = PENDING_SHOWN) -> list[Pending]:
    """The next `limit` tasks of `queue`, in the order workers take them."""
    if queue.type == "zset":
        raw: list[Any] = await client.zrange(queue.key, 0, limit - 1, withscores=True)
        return [Pending(keys.unwrap(str(e)), float(s)) for e, s in raw]
    elements = await client.lrange(queue.key, -limit, -1)
    return [Pending(keys.unwrap(str(e))) for e in reversed(elements)]


def _delayed_entry(raw: str, score: float) -> Pending:
    try:
        entry = keys.Entry.decode(raw)
    except ValueError:
        return Pending(keys.Task(payload=raw, problem="not a delayed entry"), score)
    return Pending(keys.unwrap(entry.element), score, entry.queue)


async def delayed(client: aioredis.Redis, schema: keys.KeySchema, *,
                  limit: int = PENDING_SHOWN) -> list[Pending]:
    """The `limit` delayed entries due first (score: due unix ms)."""
    raw: list[Any] = await client.zrange(schema.delayed, 0, limit - 1, withscores=True)
    return [_delayed_entry(str(e), float(s)) for e, s in raw]


async def dead_page(client: aioredis.Redis, schema: keys.KeySchema, *, page: int,
                    size: int = DEAD_PAGE) -> tuple[int, list[DeadLetter]]:
    """(records in the list, page `page` of them, newest first); one LLEN and one LRANGE."""
    start = max(0, page) * size
    async with client.pipeline(transaction=False) as pipe:
        pipe.llen(schema.dead_letter)
        pipe.lrange(schema.dead_letter, start, start + size - 1)
        total, raw = await pipe.execute()
    return int(total), [DeadLetter.parse(str(r)) for r in raw]


def digest(record: DeadLetter) -> str:
    """A short name of a record's exact bytes: what an action's confirmation form carries."""
    return hashlib.sha1(record.raw.encode("utf-8", "surrogateescape")).hexdigest()


def matches(record: DeadLetter, text: str) -> bool:
    """True when `text` is the record's task id, or appears in its payload or error (shown
    text, so `\\xff` finds a byte that is not UTF-8)."""
    if not text:
        return True
    if record.id and text == printable(record.id):
        return True
    payload = record.payload if record.payload is not None else record.raw
    return text in printable(payload) or text in printable(record.error)


async def dead_search(client: aioredis.Redis, schema: keys.KeySchema, text: str, *,
                      window: int = SEARCH_WINDOW) -> tuple[int, int, list[DeadLetter]]:
    """(records in the list, records searched, matching records newest first), over the
    newest `window` records."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.llen(schema.dead_letter)
        pipe.lrange(schema.dead_letter, 0, window - 1)
        total, raw = await pipe.execute()
    records = [DeadLetter.parse(str(r)) for r in raw]
    return int(total), len(records), [r for r in records if matches(r, text)]


SCHEDULE_FIELDS = ("through", "slot", "id", "missed", "skipped")
"""The fields of the schedules hash fire.lua keeps per schedule (`<field>:<name>`)."""


@dataclass(frozen=True)
class Streams:
    """What one refresh read besides the observation: the history and the decision log, the
    flow-control hashes, the schedules' firing record."""

    points: list[tuple[str, history.HistoryPoint]]
    decisions: list[tuple[str, history.DecisionEntry]]
    malformed: int
    """Entries that could not be decoded (skipped)."""
    flows: tuple[flow.QueueFlow, ...] = ()
    flow_error: str = ""
    """Why the flow hashes could not be read ("": read)."""
    fired: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per schedule name, the fields of its firing record that Redis holds."""
    fired_error: str = ""


def _decoded(reply: Sequence[Any], decode: Any) -> tuple[list[Any], int]:
    out, bad = [], 0
    for entry in reply:
        try:
            out.extend(decode([entry]))
        except ValueError:
            bad += 1
    return out, bad


def _fired(reply: Any, names: Sequence[str],
           key: str) -> tuple[dict[str, dict[str, str]], str]:
    if isinstance(reply, Exception):
        return {}, f"key {key}: {reply}"
    values = [None if v is None else str(v) for v in reply]
    n = len(SCHEDULE_FIELDS)
    return {name: {f: v for f, v in zip(SCHEDULE_FIELDS, values[i * n:(i + 1) * n],
                                        strict=True) if v is not None}
            for i, name in enumerate(names)}, ""


def _flows(replies: list[Any], schema: keys.KeySchema) -> tuple[tuple[flow.QueueFlow, ...], str]:
    try:
        return flowops.read_reply(replies, schema), ""
    except redis.RedisError as exc:
        return (), str(exc)


async def streams(client: aioredis.Redis, schema: keys.KeySchema, *, after: str,
                  since_ms: int, schedules: Sequence[str] = ()) -> Streams:
    """History points after stream id `after` ("" : from `since_ms`), the newest decisions,
    the two flow hashes and the firing record of `schedules` (names): one pipeline. A flow or
    schedules key of another type is reported in the result, not raised."""
    start = f"({after}" if after else str(since_ms)
    names = list(schedules)
    async with client.pipeline(transaction=False) as pipe:
        pipe.xrange(schema.history, min=start, max="+", count=HISTORY_POINTS)
        pipe.xrevrange(schema.decisions, max="+", min="-", count=DECISIONS_SHOWN)
        flowops.read_pipe(pipe, schema)
        if names:
            pipe.hmget(schema.schedules, [f"{f}:{n}" for n in names for f in SCHEDULE_FIELDS])
        replies = await pipe.execute(raise_on_error=False)
    for reply in replies[:2]:
        if isinstance(reply, Exception):
            raise reply
    raw_points, raw_decisions = replies[:2]
    points, bad_points = _decoded(raw_points, history.points)
    decisions, bad_decisions = _decoded(raw_decisions, history.decisions)
    flows, flow_error = _flows(replies[2:6], schema)
    fired, fired_error = _fired(replies[6], names, schema.schedules) if names else ({}, "")
    return Streams(points, decisions, bad_points + bad_decisions, flows, flow_error, fired,
                   fired_error)


@dataclass(frozen=True)
class Held:
    """What the workers hold: entries per worker, and the progress reports of their tasks."""

    entries: dict[str, list[keys.Entry | str]] = field(default_factory=dict)
    """An entry that is not `"<queue>\\n<score>\\n<element>"` is kept as its text."""
    progress: dict[str, dict[str, lifecycle.Progress]] = field(default_factory=dict)
    """Per worker: task id -> its last `ctx.progress` report (unreadable reports left out)."""


def _entries(reply: Any) -> list[keys.Entry | str]:
    entries: list[keys.Entry | str] = []
    for raw in reply if isinstance(reply, list) else []:
        try:
            entries.append(keys.Entry.decode(str(raw)))
        except ValueError:
            entries.append(str(raw))
    return entries


def _progress(reply: Any) -> dict[str, lifecycle.Progress]:
    out = {}
    for task_id, text in (reply.items() if isinstance(reply, dict) else ()):
        report = lifecycle.Progress.decode(str(text))
        if report is not None:
            out[str(task_id)] = report
    return out


async def held(client: aioredis.Redis, schema: keys.KeySchema, worker_ids: Sequence[str], *,
               limit: int = HELD_SHOWN) -> Held:
    """The first `limit` entries each worker holds and its progress hash (up to WORKERS_SHOWN
    workers), one pipeline of an LRANGE and an HGETALL per worker (a progress hash holds only
    the worker's running tasks: at most its concurrency)."""
    shown = list(worker_ids)[:WORKERS_SHOWN]
    if not shown:
        return Held()
    async with client.pipeline(transaction=False) as pipe:
        for w in shown:
            pipe.lrange(schema.processing(w), 0, limit - 1)
            pipe.hgetall(schema.progress(w))
        replies = await pipe.execute(raise_on_error=False)
    return Held(entries={w: _entries(replies[2 * i]) for i, w in enumerate(shown)},
                progress={w: _progress(replies[2 * i + 1]) for i, w in enumerate(shown)})
