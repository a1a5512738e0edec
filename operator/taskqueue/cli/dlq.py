"""`taskqueue dlq list|requeue|purge`: the dead-letter list of a TaskQueue.

Records are the JSON `{queue, payload, attempts, error, failed_at, id}` the worker and the
recovery script LPUSH (newest first); `taskqueue.cli.records` reads them, malformed or not.
`requeue` moves records back to their original queue as a fresh envelope (same task id and the
payload's exact bytes, attempts 0), oldest first, each batch in one MULTI/EXEC watched on the
dead-letter key so a record is never both requeued and kept, nor requeued twice. Only the
TaskQueue's own queues are destinations unless `--to KEY` names another. Each record is judged
alone: one that cannot go back (no payload, no queue, a queue outside the TaskQueue, a queue key
of another type) is kept, reported on stderr, and the others move on. `purge` drains the list in
batches like `drain`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

import redis

from taskqueue.cli import drain, numbers, ui
from taskqueue.cli.errors import EXIT_FAILURE, EXIT_USAGE, CliError, wrong_type
from taskqueue.cli.records import DeadLetter, printable, to_bytes
from taskqueue.cli.target import Target, target_options
from taskqueue.client import PRIORITY
from taskqueue.wire import keys, keyspace

BATCH = 500
SHOWN_KEPT = 20
"""Kept records reported one per line; past this, a count."""

Destination = tuple[str, str]
"""(queue key, "list" | "zset") a record goes back to."""
Resolve = Callable[[DeadLetter], Destination | str]
"""A record's destination, or why it is kept."""
Kept = list[tuple[DeadLetter, str]]


def _check_list(client: redis.Redis, key: str) -> int:
    kind = str(client.type(key))
    if kind not in ("list", "none"):
        raise wrong_type(key, kind, "list")
    return int(client.llen(key))


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    parents = target_options()
    p = sub.add_parser("dlq", help=help, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    dsub = p.add_subparsers(dest="dlq_command", required=True, metavar="{list,requeue,purge}")
    ls = dsub.add_parser("list", parents=parents, help="show dead letters, newest first")
    ls.add_argument("--limit", type=int, default=20, help="records shown (default 20; 0 = all)")
    ls.add_argument("--json", action="store_true", help="JSON list")
    ls.set_defaults(run=run_list)
    rq = dsub.add_parser("requeue", parents=parents,
                         help="move dead letters back to their queue (attempts reset to 0)")
    rq.add_argument("--id", action="append", default=[], metavar="ID",
                    help="requeue the record of this task id (repeatable)")
    rq.add_argument("--count", type=int, default=None, help="requeue the N oldest records")
    rq.add_argument("--all", action="store_true", help="requeue every record")
    rq.add_argument("--to", metavar="KEY", default=None,
                    help="push to KEY instead of each record's own queue (default: only the "
                         "TaskQueue's queues are destinations)")
    rq.add_argument("--priority", type=numbers.number(PRIORITY), default=0.0,
                    help="score for records whose queue is a zset (default 0)")
    rq.set_defaults(run=run_requeue)
    pg = dsub.add_parser("purge", parents=parents, help="delete every dead letter")
    pg.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    pg.add_argument("--batch", type=int, default=drain.DEFAULT_BATCH, help="records per command")
    pg.set_defaults(run=run_purge)


def run_list(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("dlq list")
    client = target.connect()
    total = _check_list(client, schema.dead_letter)
    raw = client.lrange(schema.dead_letter, 0, args.limit - 1 if args.limit > 0 else -1)
    records = [DeadLetter.parse(str(r)) for r in raw]
    now = time.time()
    if args.json:
        print(json.dumps([r.as_json(now) for r in records], ensure_ascii=False))
        return 0
    rows = [[printable(r.id) or "-", printable(r.queue) or "-",
             "?" if r.attempts is None else str(r.attempts),
             ui.duration(None if r.failed_at is None else now - r.failed_at),
             ui.preview(printable(_error_text(r)), 50),
             ui.preview(printable(r.payload if r.payload is not None else r.raw), 30)]
            for r in records]
    print(f"{schema.dead_letter}: {total} dead letter(s)"
          + (f", showing the newest {len(records)}" if len(records) < total else ""))
    if rows:
        print(ui.table(["TASK", "QUEUE", "ATTEMPTS", "FAILED", "ERROR", "PAYLOAD"], rows))
    return 0


def _error_text(record: DeadLetter) -> str:
    if not record.problems:
        return record.error
    return f"[malformed: {', '.join(record.problems)}] {record.error}".rstrip()


def _resolver(client: redis.Redis, target: Target, allowed: tuple[str, ...],
              to: str | None) -> Resolve:
    """Where each record goes: `to`, else its own queue when it is one of `allowed`; a queue key
    of another type than the TaskQueue declares (or than list/zset) keeps the record."""
    found: dict[str, str] = {}

    def resolve(record: DeadLetter) -> Destination | str:
        problem = record.unusable()
        if problem is not None:
            return problem
        key = to or record.queue
        if not key:
            return "the record names no queue; pass --to KEY to requeue it there"
        if to is None and key not in allowed:
            return (f"queue {printable(key)!r} is not a queue of this TaskQueue; pass --to KEY "
                    "to requeue it anyway")
        if key not in found:
            found[key] = str(client.type(to_bytes(key)))
        declared = target.queue_type(key)
        actual = found[key]
        if actual not in (("none", declared) if declared else ("none", "list", "zset")):
            return (f"queue key {printable(key)!r} holds a {actual}, not a "
                    f"{declared or 'list or zset'}")
        return key, declared or (actual if actual != "none" else "list")

    return resolve


Pick = Callable[[list[DeadLetter]], list[DeadLetter]]


def _requeue_batch(client: redis.Redis, dead_key: str, start: int, pick: Pick,
                   resolve: Resolve, priority: float, *, stop: int = -1) -> tuple[int, Kept]:
    """One watched transaction: of the records from index `start` to `stop`, push the picked
    ones that can go back and remove them; returns (moved, picked records kept and why)."""
    with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                pipe.watch(dead_key)  # type: ignore[no-untyped-call]
                records = [DeadLetter.parse(str(r)) for r in pipe.lrange(dead_key, start, stop)]
                plan: list[tuple[DeadLetter, Destination]] = []
                kept: Kept = []
                for record in pick(records):
                    where = resolve(record)
                    if isinstance(where, str):
                        kept.append((record, where))
                    else:
                        plan.append((record, where))
                pipe.multi()
                for record, (key, kind) in plan:
                    assert record.payload is not None  # resolve() keeps records without one
                    # bytes, encoded here: hiredis would encode str strictly, and a payload
                    # that is not UTF-8 must go back as the same bytes
                    element = to_bytes(keys.wrap(record.payload, attempts=0,
                                                 task_id=record.id or None))
                    if kind == "zset":
                        pipe.zadd(to_bytes(key), {element: priority})
                    else:
                        pipe.rpush(to_bytes(key), element)  # the right end: served next
                    pipe.lrem(dead_key, -1, to_bytes(record.raw))  # type: ignore[arg-type]
                results = pipe.execute(raise_on_error=False)
                return len(plan) - _restore_failed(client, dead_key, plan, results, kept), kept
            except redis.WatchError:
                continue


def _restore_failed(client: redis.Redis, dead_key: str,
                    plan: list[tuple[DeadLetter, Destination]], results: list[Any],
                    kept: Kept) -> int:
    """A push that failed inside EXEC (its key changed type meanwhile) did not roll back the
    LREM: put the record back at the oldest end. Returns how many."""
    failed = 0
    for i, (record, (key, _)) in enumerate(plan):
        if isinstance(results[2 * i], Exception):
            client.rpush(dead_key, to_bytes(record.raw))
            kept.append((record, f"push to {printable(key)!r} failed: {results[2 * i]}"))
            failed += 1
    return failed


def run_requeue(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("dlq requeue")
    if bool(args.id) + (args.count is not None) + bool(args.all) != 1:
        raise CliError("dlq requeue: give exactly one of --id ID..., --count N, --all",
                       EXIT_USAGE)
    if args.to is not None and not keyspace.is_valid_key(args.to):
        raise CliError(f"--to {args.to!r}: not a valid key (1-512 characters, no space or "
                       "control character)",
                       EXIT_USAGE)
    client = target.connect()
    total = _check_list(client, schema.dead_letter)
    resolve = _resolver(client, target, schema.queue_keys, args.to)
    if args.id:
        wanted = set(args.id)
        moved, kept = _requeue_batch(
            client, schema.dead_letter, 0, lambda rs: [r for r in rs if r.id in wanted], resolve,
            args.priority)
        missing = len(wanted) - moved - len(kept)
        _report_kept(kept)
        print(f"requeued {moved} task(s)" + (f"; {missing} id(s) not found" if missing else "")
              + (f"; {len(kept)} record(s) kept" if kept else ""))
        return EXIT_FAILURE if missing or kept else 0
    goal = total if args.all else min(max(args.count, 0), total)
    return _requeue_oldest(client, schema.dead_letter, goal, resolve, args.priority)


def requeue_picked(client: redis.Redis, target: Target, *, stop: int, pick: Pick
                   ) -> tuple[int, Kept]:
    """Requeue the records `pick` chooses among the newest `stop + 1` to their own queue (the
    TaskQueue's queues only), byte-exact, in one watched transaction: (moved, kept and why).
    The web console's requeue."""
    schema = target.require_schema("requeue")
    resolve = _resolver(client, target, schema.queue_keys, None)
    return _requeue_batch(client, schema.dead_letter, 0, pick, resolve, 0.0, stop=stop)


def delete_picked(client: redis.Redis, dead_key: str, *, stop: int, pick: Pick) -> int:
    """Delete the records `pick` chooses among the newest `stop + 1`, in one transaction
    watched on the dead-letter key; returns how many. The web console's delete."""
    with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                pipe.watch(dead_key)  # type: ignore[no-untyped-call]
                records = [DeadLetter.parse(str(r)) for r in pipe.lrange(dead_key, 0, stop)]
                chosen = pick(records)
                pipe.multi()
                for record in chosen:
                    pipe.lrem(dead_key, -1, to_bytes(record.raw))  # type: ignore[arg-type]
                return sum(int(n) for n in pipe.execute())
            except redis.WatchError:
                continue


def kept_lines(kept: Kept) -> list[str]:
    """The kept records as lines (up to SHOWN_KEPT), then a count."""
    lines = [f"kept {record.label()}: {why}" for record, why in kept[:SHOWN_KEPT]]
    if len(kept) > SHOWN_KEPT:
        lines.append(f"... and {len(kept) - SHOWN_KEPT} more record(s) kept")
    return lines


def _before_last(skipped: int) -> Pick:
    def pick(records: list[DeadLetter]) -> list[DeadLetter]:
        return records[: len(records) - skipped]

    return pick


def _requeue_oldest(client: redis.Redis, dead_key: str, goal: int, resolve: Resolve,
                    priority: float) -> int:
    progress = ui.Progress(goal, "requeueing")
    moved, kept = 0, Kept()
    while moved + len(kept) < goal:
        size = min(BATCH, goal - moved - len(kept))
        # the oldest records are at the right end, behind the ones already kept
        m, k = _requeue_batch(client, dead_key, -(size + len(kept)), _before_last(len(kept)),
                              resolve, priority)
        if m + len(k) == 0:
            break
        moved, kept = moved + m, kept + k
        progress.update(moved + len(kept))
    progress.finish()
    _report_kept(kept)
    print(f"requeued {moved} task(s) from {dead_key}"
          + (f"; {len(kept)} record(s) kept" if kept else ""))
    return EXIT_FAILURE if kept else 0


def _report_kept(kept: Kept) -> None:
    """One stderr line per kept record (up to SHOWN_KEPT), then a count."""
    for line in kept_lines(kept):
        sys.stderr.write(f"taskqueue: {line}\n")


def run_purge(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("dlq purge")
    if args.batch < 1:
        raise CliError("--batch must be >= 1", EXIT_USAGE)
    client = target.connect()
    _check_list(client, schema.dead_letter)
    return drain.drain_key(client, schema.dead_letter, batch=args.batch, yes=args.yes,
                           what="dead letters")
