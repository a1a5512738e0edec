"""`taskqueue enqueue KEY PAYLOAD...`: push tasks as the worker expects them.

Each payload is wrapped in the task envelope (`taskqueue.keys.wrap`, as `taskqueue.client`
does: id, attempts 0, enqueue time) unless `--raw`, and LPUSHed to a list queue or ZADDed to a
zset queue with `--priority` as its score (lowest first). `-` reads payloads from stdin, one per
line. Pushes are pipelined 1000 at a time. Prints the task ids.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator

import redis

from taskqueue import keys, models
from taskqueue.cli.errors import EXIT_USAGE, CliError, wrong_type
from taskqueue.cli.target import Target

PIPELINE_BATCH = 1000


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               parents: list[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("enqueue", parents=parents, help="push tasks to a queue",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("key", metavar="KEY", help="queue key")
    p.add_argument("payloads", metavar="PAYLOAD", nargs="+",
                   help="task payloads; '-' reads them from stdin, one per line")
    p.add_argument("--priority", type=float, default=None,
                   help="score in a zset queue (lowest first; default 0)")
    p.add_argument("--raw", action="store_true",
                   help="push the payload as it is, without the envelope (no id, no age)")
    p.set_defaults(run=run)


def payloads(args: list[str], stdin: Iterable[str]) -> Iterator[str]:
    """The payloads given, with '-' replaced by the non-empty lines of stdin."""
    for arg in args:
        if arg == "-":
            yield from (line.rstrip("\r\n") for line in stdin if line.strip())
        else:
            yield arg


def queue_type(client: redis.Redis, target: Target, key: str,
               priority: float | None) -> models.QueueType:
    """The declared type, else the key's type in Redis, else zset with --priority or list."""
    if not models.is_valid_key(key):
        raise CliError(f"{key!r} is not a valid queue key (1-512 characters, no spaces)",
                       EXIT_USAGE)
    if target.schema is not None and target.schema.queues and target.queue_type(key) is None:
        known = ", ".join(target.schema.queue_keys)
        raise CliError(f"{key!r} is not a queue of TaskQueue {target.name} (queues: {known})",
                       EXIT_USAGE)
    existing = str(client.type(key))
    if existing not in ("none", "list", "zset"):
        raise wrong_type(key, existing, "list or zset")
    declared = target.queue_type(key)
    kind: models.QueueType = declared or (
        "zset" if existing == "zset" or (existing == "none" and priority is not None) else "list"
    )
    if existing != "none" and existing != kind:
        raise wrong_type(key, existing, kind)
    if kind == "list" and priority is not None:
        raise CliError(f"--priority applies to zset queues; {key!r} is a list", EXIT_USAGE)
    return kind


def push(client: redis.Redis, key: str, kind: models.QueueType, items: Iterable[str], *,
         priority: float, raw: bool) -> list[str]:
    """Push every item (pipelined by PIPELINE_BATCH); returns the task ids (empty when raw)."""
    ids: list[str] = []
    pipe = client.pipeline(transaction=False)
    pending = 0
    for payload in items:
        element = payload
        if not raw:
            element = keys.wrap(payload)  # the id keys.wrap makes (time-ordered: FIFO in a zset)
            ids.append(keys.unwrap(element).id)
        if kind == "zset":
            pipe.zadd(key, {element: priority})
        else:
            pipe.lpush(key, element)
        pending += 1
        if pending >= PIPELINE_BATCH:
            pipe.execute()
            pending = 0
    if pending:
        pipe.execute()
    return ids


def run(target: Target, args: argparse.Namespace) -> int:
    client = target.connect()
    kind = queue_type(client, target, args.key, args.priority)
    items = list(payloads(args.payloads, sys.stdin))
    ids = push(client, args.key, kind, items, priority=args.priority or 0.0, raw=args.raw)
    for task_id in ids:
        print(task_id)
    print(f"enqueued {len(items)} task(s) to {args.key} ({kind})", file=sys.stderr)
    return 0
