"""`taskqueue enqueue KEY PAYLOAD...`: push tasks as the worker expects them.

Each payload is wrapped in the task envelope (`taskqueue.keys.wrap`, as `taskqueue.client`
does: id, attempts 0, enqueue time) unless `--raw`, and LPUSHed to a list queue or ZADDed to a
zset queue with `--priority` as its score (lowest first). `-` reads payloads from stdin, one per
line. Pushes are pipelined 1000 at a time. Prints the task ids.

`--in 30s` / `--at TIME` schedule the tasks: they wait in the TaskQueue's delayed zset and the
workers promote them when due. `--unique-for SECONDS` makes a second enqueue of the same id
within that window a no-op (the id is `--id`, else the payload's sha1); the id is printed
either way and stderr counts the no-ops. `--wait-replicas N` (durable mode) returns only once
N replicas have the tasks, else exits 1 saying they may be lost.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

import redis

from taskqueue import client as producer
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
    when = p.add_mutually_exclusive_group()
    when.add_argument("--in", dest="delay", metavar="DURATION", type=duration, default=None,
                      help="schedule: due after DURATION (30s, 5m, 2h, 1d, or seconds)")
    when.add_argument("--at", metavar="TIME", type=point_in_time, default=None,
                      help="schedule: due at TIME (ISO 8601, UTC unless it has an offset; "
                           "or unix seconds)")
    p.add_argument("--unique-for", metavar="DURATION", type=duration, default=None,
                   help="a second enqueue of the same id within DURATION is a no-op")
    p.add_argument("--id", dest="task_id", default=None,
                   help="task id (a business id; one payload only); default a new id, "
                        "or with --unique-for the payload's sha1")
    p.add_argument("--wait-replicas", metavar="N", type=replica_count, default=0,
                   help="durable mode: return only once N replicas have the tasks (WAIT after "
                        "each batch); exit 1 when they do not confirm within 2 s")
    p.set_defaults(run=run)


_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)\s*$")


def duration(text: str) -> float:
    """Seconds of '30s', '5m', '2h', '1d' or a plain number of seconds. Pure."""
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration; use e.g. 30s, 5m, 2h, 1d or seconds")
    return float(m.group(1)) * _UNITS[m.group(2)]


def replica_count(text: str) -> int:
    """A number of replicas (>= 0). Pure."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of replicas; use 0, 1, 2...")
    return int(text)


def point_in_time(text: str) -> float:
    """Unix seconds of an ISO 8601 time (UTC unless it carries an offset) or of a number. Pure."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time; use ISO 8601 like 2026-12-01T12:00:00Z or unix seconds"
        ) from None
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


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


def plain_pushes(key: str, kind: models.QueueType, items: Iterable[str], *,
                 priority: float, raw: bool) -> list[producer.Push]:
    """The LPUSH/ZADD of each item, enveloped unless `raw` (a raw push has no task id). Pure
    apart from the ids and the clock."""
    pushes: list[producer.Push] = []
    for payload in items:
        element = payload if raw else keys.wrap(payload)  # time-ordered ids: FIFO in a zset
        pushes.append(producer.Push(
            task_id="" if raw else keys.unwrap(element).id, queue_key=key, target=key,
            how="zadd" if kind == "zset" else "lpush", score=priority, element=element,
            unique_ms=0, unique_key=""))
    return pushes


def send(client: redis.Redis, pushes: list[producer.Push], *, wait_replicas: int) -> list[bool]:
    """Send the pushes, pipelined PIPELINE_BATCH at a time; with `wait_replicas` each batch ends
    in WAIT (durable mode). Whether each was pushed (False: a unique no-op)."""
    created: list[bool] = []
    for start in range(0, len(pushes), PIPELINE_BATCH):
        batch = pushes[start:start + PIPELINE_BATCH]
        if wait_replicas:
            try:
                created += producer.push_durably(client, batch, replicas=wait_replicas)
            except producer.NotReplicated as exc:
                raise CliError(f"{exc}: the tasks may be lost if the master fails now; push "
                               f"them again ({start} of {len(pushes)} confirmed before)") from None
            continue
        pipe = client.pipeline(transaction=False)
        for p in batch:
            producer.push_sync(pipe, p)
        created += [bool(r) for r in pipe.execute()]
    return created


def run(target: Target, args: argparse.Namespace) -> int:
    client = target.connect()
    kind = queue_type(client, target, args.key, args.priority)
    items = list(payloads(args.payloads, sys.stdin))
    options = args.delay is not None or args.at is not None or args.unique_for is not None
    if args.task_id is not None and len(items) != 1:
        raise CliError(f"--id names one task; {len(items)} payloads given", EXIT_USAGE)
    if not options and args.task_id is None:
        pushes = plain_pushes(args.key, kind, items, priority=args.priority or 0.0, raw=args.raw)
        send(client, pushes, wait_replicas=args.wait_replicas)
        for p in pushes:
            if p.task_id:
                print(p.task_id)
        print(f"enqueued {len(items)} task(s) to {args.key} ({kind})", file=sys.stderr)
        return 0
    if args.raw:
        raise CliError("--raw pushes no envelope, so no id: drop it to use --in/--at/"
                       "--unique-for/--id", EXIT_USAGE)
    prefix = (target.schema.prefix if target.schema is not None
              else getattr(args, "key_prefix", None) or args.key)
    now = time.time()
    pushes = [producer.plan(args.key, item, priority=args.priority if kind == "zset" else None,
                            task_id=args.task_id, delay=args.delay, at=args.at,
                            unique_for=args.unique_for, key_prefix=prefix, now=now)
              for item in items]
    created = send(client, pushes, wait_replicas=args.wait_replicas)
    for p in pushes:
        print(p.task_id)
    skipped = created.count(False)
    where = f"{prefix}:delayed (scheduled)" if pushes and pushes[0].target != args.key else \
        f"{args.key} ({kind})"
    print(f"enqueued {len(items) - skipped} task(s) to {where}"
          + (f"; {skipped} already enqueued (unique)" if skipped else ""), file=sys.stderr)
    return 0
