"""The console's Redis reads, each bounded: no page load scans a key.

A list queue shows its next tasks from the right end (served next), a zset queue its lowest
scores (ZPOPMIN), the delayed zset its earliest due entries; dead letters come a page at a time
(LRANGE of one page, newest first) and a search reads at most `SEARCH_WINDOW` of the newest
records. The history and the decision log are read through `taskqueue.wire.history` (one XRANGE
from the last entry seen, one XREVRANGE of the newest decisions).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from taskqueue.cli.records import DeadLetter, printable
from taskqueue.wire import history, keys, lifecycle

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
"""Workers whose held tasks are read."""


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


@dataclass(frozen=True)
class Streams:
    """What one refresh read of the history and the decision log."""

    points: list[tuple[str, history.HistoryPoint]]
    decisions: list[tuple[str, history.DecisionEntry]]
    malformed: int
    """Entries that could not be decoded (skipped)."""


def _decoded(reply: Sequence[Any], decode: Any) -> tuple[list[Any], int]:
    out, bad = [], 0
    for entry in reply:
        try:
            out.extend(decode([entry]))
        except ValueError:
            bad += 1
    return out, bad


async def streams(client: aioredis.Redis, schema: keys.KeySchema, *, after: str,
                  since_ms: int) -> Streams:
    """History points after stream id `after` ("" : from `since_ms`) and the newest decisions:
    one pipeline of an XRANGE and an XREVRANGE."""
    start = f"({after}" if after else str(since_ms)
    async with client.pipeline(transaction=False) as pipe:
        pipe.xrange(schema.history, min=start, max="+", count=HISTORY_POINTS)
        pipe.xrevrange(schema.decisions, max="+", min="-", count=DECISIONS_SHOWN)
        raw_points, raw_decisions = await pipe.execute()
    points, bad_points = _decoded(raw_points, history.points)
    decisions, bad_decisions = _decoded(raw_decisions, history.decisions)
    return Streams(points, decisions, bad_points + bad_decisions)


async def held(client: aioredis.Redis, schema: keys.KeySchema, worker_ids: Sequence[str], *,
               limit: int = HELD_SHOWN) -> dict[str, list[keys.Entry | str]]:
    """The first `limit` entries each worker holds (up to WORKERS_SHOWN workers), one pipeline;
    an entry that is not `"<queue>\\n<score>\\n<element>"` is kept as its text."""
    shown = list(worker_ids)[:WORKERS_SHOWN]
    if not shown:
        return {}
    async with client.pipeline(transaction=False) as pipe:
        for w in shown:
            pipe.lrange(schema.processing(w), 0, limit - 1)
        replies = await pipe.execute(raise_on_error=False)
    out: dict[str, list[keys.Entry | str]] = {}
    for w, reply in zip(shown, replies, strict=True):
        entries: list[keys.Entry | str] = []
        for raw in reply if isinstance(reply, list) else []:
            try:
                entries.append(keys.Entry.decode(str(raw)))
            except ValueError:
                entries.append(str(raw))
        out[w] = entries
    return out


async def progress(client: aioredis.Redis, schema: keys.KeySchema,
                   worker_ids: Sequence[str]) -> dict[str, dict[str, lifecycle.Progress]]:
    """Each worker's running tasks' last progress reports (task id -> report; `ctx.progress`),
    from its `<prefix>:progress:<worker id>` hash (up to WORKERS_SHOWN workers), one pipeline;
    a key of another type or an unreadable report reads as none."""
    shown = list(worker_ids)[:WORKERS_SHOWN]
    if not shown:
        return {}
    async with client.pipeline(transaction=False) as pipe:
        for w in shown:
            pipe.hgetall(schema.progress(w))
        replies = await pipe.execute(raise_on_error=False)
    out: dict[str, dict[str, lifecycle.Progress]] = {}
    for w, reply in zip(shown, replies, strict=True):
        found = {str(k): lifecycle.Progress.decode(str(v))
                 for k, v in (reply.items() if isinstance(reply, dict) else [])}
        out[w] = {k: v for k, v in found.items() if v is not None}
    return out
