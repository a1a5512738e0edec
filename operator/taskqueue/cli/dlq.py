"""`taskqueue dlq list|requeue|purge`: the dead-letter list of a TaskQueue.

Records are the JSON `{queue, payload, attempts, error, failed_at, id}` the worker and the
recovery script LPUSH (newest first). `requeue` moves records back to their original queue as a
fresh envelope (same task id, attempts 0), oldest first, each batch in one MULTI/EXEC watched on
the dead-letter key so a record is never both requeued and kept, nor requeued twice. `purge`
drains the list in batches like `drain`.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis

from taskqueue import keys
from taskqueue.cli import drain, ui
from taskqueue.cli.errors import EXIT_FAILURE, EXIT_USAGE, CliError, wrong_type
from taskqueue.cli.target import Target

BATCH = 500


@dataclass(frozen=True)
class DeadLetter:
    raw: str
    queue: str
    payload: str
    attempts: int
    error: str
    failed_at: float | None
    id: str

    @classmethod
    def parse(cls, raw: str) -> DeadLetter:
        try:
            data: Any = json.loads(raw)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            return cls(raw, "", raw, 0, "not a dead-letter record", None, "")
        payload = data.get("payload", "")
        return cls(
            raw=raw,
            queue=str(data.get("queue") or ""),
            payload=payload if isinstance(payload, str) else json.dumps(payload),
            attempts=int(data.get("attempts") or 0),
            error=str(data.get("error") or ""),
            failed_at=float(data["failed_at"]) if data.get("failed_at") else None,
            id=str(data.get("id") or ""),
        )

    def as_json(self, now: float) -> dict[str, Any]:
        age = None if self.failed_at is None else round(now - self.failed_at, 3)
        return {"id": self.id, "queue": self.queue, "attempts": self.attempts,
                "error": self.error, "failed_at": self.failed_at, "age_seconds": age,
                "payload": self.payload}


def _check_list(client: redis.Redis, key: str) -> int:
    kind = str(client.type(key))
    if kind not in ("list", "none"):
        raise wrong_type(key, kind, "list")
    return int(client.llen(key))


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("dlq", help="dead letters: list, requeue, purge", description=__doc__,
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
    rq.add_argument("--priority", type=float, default=0.0,
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
    rows = [[r.id or "-", r.queue or "-", str(r.attempts),
             ui.duration(None if r.failed_at is None else now - r.failed_at),
             ui.preview(r.error, 50), ui.preview(r.payload, 30)] for r in records]
    print(f"{schema.dead_letter}: {total} dead letter(s)"
          + (f", showing the newest {len(records)}" if len(records) < total else ""))
    if rows:
        print(ui.table(["TASK", "QUEUE", "ATTEMPTS", "FAILED", "ERROR", "PAYLOAD"], rows))
    return 0


def _queue_types(client: redis.Redis, target: Target) -> Callable[[str], str]:
    seen: dict[str, str] = {}

    def kind(queue: str) -> str:
        if queue not in seen:
            declared = target.queue_type(queue)
            found = str(client.type(queue))
            if found not in ("none", "list", "zset"):
                raise wrong_type(queue, found, "list or zset")
            seen[queue] = declared or (found if found != "none" else "list")
        return seen[queue]

    return kind


Pick = Callable[[list[DeadLetter]], list[DeadLetter]]


def _requeue_batch(client: redis.Redis, dead_key: str, start: int, pick: Pick,
                   kind: Callable[[str], str], priority: float) -> tuple[int, int]:
    """One watched transaction: of the records from index `start` to the end, remove the picked
    ones and push them to their queue; returns (moved, picked without a queue)."""
    with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                pipe.watch(dead_key)  # type: ignore[no-untyped-call]
                records = [DeadLetter.parse(str(r)) for r in pipe.lrange(dead_key, start, -1)]
                chosen = pick(records)
                movable = [r for r in chosen if r.queue]
                types = {r.queue: kind(r.queue) for r in movable}
                pipe.multi()
                for r in movable:
                    pipe.lrem(dead_key, -1, r.raw)
                    element = keys.wrap(r.payload, attempts=0, task_id=r.id or None)
                    if types[r.queue] == "zset":
                        pipe.zadd(r.queue, {element: priority})
                    else:
                        pipe.rpush(r.queue, element)  # the right end: served next
                pipe.execute()
                return len(movable), len(chosen) - len(movable)
            except redis.WatchError:
                continue


def run_requeue(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("dlq requeue")
    if bool(args.id) + (args.count is not None) + bool(args.all) != 1:
        raise CliError("dlq requeue: give exactly one of --id ID..., --count N, --all",
                       EXIT_USAGE)
    client = target.connect()
    total = _check_list(client, schema.dead_letter)
    kind = _queue_types(client, target)
    if args.id:
        wanted = set(args.id)
        moved, skipped = _requeue_batch(
            client, schema.dead_letter, 0, lambda rs: [r for r in rs if r.id in wanted], kind,
            args.priority)
        missing = len(wanted) - moved - skipped
        print(f"requeued {moved} task(s)" + (f"; {missing} id(s) not found" if missing else "")
              + (f"; {skipped} without a queue kept" if skipped else ""))
        return EXIT_FAILURE if missing or skipped else 0
    goal = total if args.all else min(max(args.count, 0), total)
    return _requeue_oldest(client, schema.dead_letter, goal, kind, args.priority)


def _before_last(skipped: int) -> Pick:
    def pick(records: list[DeadLetter]) -> list[DeadLetter]:
        return records[: len(records) - skipped]

    return pick


def _requeue_oldest(client: redis.Redis, dead_key: str, goal: int, kind: Callable[[str], str],
                    priority: float) -> int:
    progress = ui.Progress(goal, "requeueing")
    moved = skipped = 0
    while moved + skipped < goal:
        size = min(BATCH, goal - moved - skipped)
        # the oldest records are at the right end, behind the ones already skipped (no queue)
        m, s = _requeue_batch(client, dead_key, -(size + skipped), _before_last(skipped), kind,
                              priority)
        if m + s == 0:
            break
        moved, skipped = moved + m, skipped + s
        progress.update(moved + skipped)
    progress.finish()
    print(f"requeued {moved} task(s) from {dead_key}"
          + (f"; {skipped} record(s) without a queue kept" if skipped else ""))
    return EXIT_FAILURE if skipped else 0


def run_purge(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("dlq purge")
    if args.batch < 1:
        raise CliError("--batch must be >= 1", EXIT_USAGE)
    client = target.connect()
    _check_list(client, schema.dead_letter)
    return drain.drain_key(client, schema.dead_letter, batch=args.batch, yes=args.yes,
                           what="dead letters")
