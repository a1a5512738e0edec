"""`taskqueue enqueue KEY PAYLOAD...`: push tasks as the worker expects them.

Each payload is wrapped in the task envelope (`taskqueue.wire.keys.wrap`, as `taskqueue.client`
does: id, attempts 0, enqueue time) unless `--raw`, and LPUSHed to a list queue or ZADDed to a
zset queue with `--priority` as its score (lowest first). `-` reads payloads from stdin, one per
line. A payload is the bytes given: an argument as the shell passed it, a line of stdin without
its newline (and a CR before it), so a payload that is not UTF-8 reaches the handler byte for
byte. Prints the task ids.

Every payload and option is checked before anything is sent. Pushes are pipelined 1000 at a
time and each is sent once (no automatic retry: a re-sent push could run twice). When a batch
fails, the ids of the tasks already pushed are still printed, and the error line says how many
were pushed and which inputs to push again (and which may or may not be in the queue, when
Redis did not answer).

`--in 30s` / `--at TIME` schedule the tasks: they wait in the TaskQueue's delayed zset and the
workers promote them when due. `--unique-for SECONDS` makes a second enqueue of the same id
within that window a no-op (the id is `--id`, else the payload's sha1); the id is printed
either way and stderr counts the no-ops. `--wait-replicas N` (durable mode) returns only once
N replicas have the tasks, else exits 1 saying they may be lost. `--track` (for a TaskQueue with
spec.worker.tracking) writes each task's index with its push, in one atomic call
(enqueue.lua), so `taskqueue status ID` says queued (or delayed) before a worker takes it.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, BinaryIO

import redis

from taskqueue import client as producer
from taskqueue.api.limits import Bounds
from taskqueue.cli import numbers
from taskqueue.cli.errors import EXIT_USAGE, CliError, wrong_type
from taskqueue.cli.records import is_utf8
from taskqueue.cli.target import Target, target_options
from taskqueue.wire import keys, keyspace

if TYPE_CHECKING:
    from taskqueue.api import models

PIPELINE_BATCH = 1000

_MAX_DAYS = producer.MAX_AHEAD_SECONDS // 86400

IN = Bounds(producer.DELAY.low, producer.DELAY.high,
            f"a duration from 0s to {_MAX_DAYS}d (30s, 5m, 2h, 1d or seconds)")
UNIQUE_FOR = Bounds(producer.UNIQUE_FOR.low, producer.UNIQUE_FOR.high,
                    f"a duration from 0.001s to {_MAX_DAYS}d (30s, 5m, 2h, 1d or seconds)")


def replica_count(text: str) -> int:
    """A number of replicas (>= 0). Pure."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of replicas; use 0, 1, 2...")
    return int(text)


def point_in_time(text: str) -> float:
    """Unix seconds of an ISO 8601 time (UTC unless it carries an offset) or of a number, from
    the epoch to 10 years ahead. Pure apart from the clock."""
    try:
        seconds = float(text)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a time; use ISO 8601 like 2026-12-01T12:00:00Z or unix "
                "seconds") from None
        seconds = (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    bounds = producer.at_bounds(time.time())
    if not bounds.accepts(seconds):
        raise argparse.ArgumentTypeError(f"{text!r} is out of range; give {bounds.says}")
    return seconds


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("enqueue", parents=target_options(), help=help,
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("key", metavar="KEY", help="queue key")
    p.add_argument("payloads", metavar="PAYLOAD", nargs="+",
                   help="task payloads; '-' reads them from stdin, one per line")
    p.add_argument("--priority", type=numbers.number(producer.PRIORITY), default=None,
                   help="score in a zset queue (lowest first; default 0)")
    p.add_argument("--raw", action="store_true",
                   help="push the payload as it is, without the envelope (no id, no age)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--in", dest="delay", metavar="DURATION", default=None,
                      type=numbers.number(IN, parse=numbers.duration, what="a duration"),
                      help="schedule: due after DURATION (30s, 5m, 2h, 1d, or seconds)")
    when.add_argument("--at", metavar="TIME", type=point_in_time, default=None,
                      help="schedule: due at TIME (ISO 8601, UTC unless it has an offset; "
                           "or unix seconds)")
    p.add_argument("--unique-for", metavar="DURATION", default=None,
                   type=numbers.number(UNIQUE_FOR, parse=numbers.duration, what="a duration"),
                   help="a second enqueue of the same id within DURATION is a no-op")
    p.add_argument("--id", dest="task_id", default=None,
                   help="task id (a business id; one payload only); default a new id, "
                        "or with --unique-for the payload's sha1")
    p.add_argument("--track", action="store_true",
                   help="write each task's index with its push (spec.worker.tracking), so "
                        "`taskqueue status ID` knows it while it is queued")
    p.add_argument("--wait-replicas", metavar="N", type=replica_count, default=0,
                   help="durable mode: return only once N replicas have the tasks (WAIT after "
                        "each batch); exit 1 when they do not confirm within 2 s")
    p.set_defaults(run=run)


@dataclass(frozen=True)
class Item:
    """One payload given and where: PAYLOAD argument `number`, or line `number` of stdin."""

    text: str
    """The payload's bytes as text (`client.payload_text`)."""
    stdin: bool
    number: int


def payloads(args: Sequence[str], stdin: BinaryIO) -> Iterator[Item]:
    """The payloads given, '-' replaced by the non-blank lines of `stdin`, each the bytes given:
    an argument as the shell passed it (`os.fsencode`), a line without its LF or CRLF."""
    for position, arg in enumerate(args, 1):
        if arg != "-":
            yield Item(producer.payload_text(os.fsencode(arg)), stdin=False, number=position)
            continue
        for number, line in enumerate(stdin, 1):
            data = line.removesuffix(b"\n").removesuffix(b"\r")
            if data.strip():
                yield Item(producer.payload_text(data), stdin=True, number=number)


def binary_stdin() -> BinaryIO:
    """stdin as bytes (a text stream that has no buffer, e.g. a test's, is encoded back)."""
    buffer: BinaryIO | None = getattr(sys.stdin, "buffer", None)
    if buffer is not None:
        return buffer
    return io.BytesIO(producer.wire(sys.stdin.read()))


def _spans(numbers: list[int]) -> str:
    """'3, 5-9, 12' of sorted `numbers`. Pure."""
    spans: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(spans)


def where(items: Sequence[Item]) -> str:
    """`items` by source as ranges, e.g. 'PAYLOAD 2, stdin lines 1001-1500'. Pure."""
    parts = []
    for stdin, label in ((False, "PAYLOAD"), (True, "stdin line")):
        numbers = [i.number for i in items if i.stdin is stdin]
        if numbers:
            parts.append(f"{label}{'s' if len(numbers) > 1 else ''} {_spans(numbers)}")
    return ", ".join(parts)


def queue_type(client: redis.Redis, target: Target, key: str,
               priority: float | None) -> models.QueueType:
    """The declared type, else the key's type in Redis, else zset with --priority or list."""
    if not keyspace.is_valid_key(key) or not is_utf8(key):
        raise CliError(f"{key!r} is not a valid queue key (1-512 characters of UTF-8 text, no "
                       "spaces)", EXIT_USAGE)
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
        task_id = "" if raw else keys.new_task_id()  # time-ordered ids: FIFO in a zset
        element = payload if raw else keys.wrap(payload, task_id=task_id)
        pushes.append(producer.Push(
            task_id=task_id, queue_key=key, target=key,
            how="zadd" if kind == "zset" else "lpush", score=priority, element=element,
            unique_ms=0, unique_key=""))
    return pushes


PUSHED, EXISTING, REFUSED, UNKNOWN, UNCONFIRMED, UNSENT = (
    "pushed", "existing", "refused", "unknown", "unconfirmed", "unsent")
"""What became of each push (`Sent.fates`): pushed; a unique no-op (already enqueued); refused
by Redis (an error reply: not pushed); sent without a reply (may or may not be in the queue);
pushed but not confirmed by the replicas (durable mode); not sent."""


@dataclass(frozen=True)
class Sent:
    """What `send` did with each push, in order, and the error that stopped it (None: all
    were answered)."""

    fates: list[str]
    error: redis.RedisError | None = None


def _fate(reply: object) -> str:
    if isinstance(reply, Exception):
        return REFUSED
    return PUSHED if reply else EXISTING


def _batch(client: redis.Redis, batch: list[producer.Push],
           wait_replicas: int) -> tuple[list[str], redis.RedisError | None]:
    """Send one batch: the fate of each push and the first error reply (raises when the batch
    got no reply, NotReplicated when the replicas did not confirm it)."""
    replies = producer.send(client, producer.Send.of(batch, replicas=wait_replicas),
                            raise_on_error=False)
    errors = [r for r in replies if isinstance(r, redis.RedisError)]
    return [_fate(r) for r in replies], errors[0] if errors else None


def send(client: redis.Redis, pushes: list[producer.Push], *, wait_replicas: int) -> Sent:
    """Send the pushes, pipelined PIPELINE_BATCH at a time, each once; with `wait_replicas`
    each batch ends in WAIT (durable mode). Stops after the first batch that failed."""
    fates: list[str] = []
    for start in range(0, len(pushes), PIPELINE_BATCH):
        batch = pushes[start:start + PIPELINE_BATCH]
        error: redis.RedisError | None
        try:
            batch_fates, error = _batch(client, batch, wait_replicas)
        except producer.NotReplicated as exc:
            batch_fates, error = [UNCONFIRMED] * len(batch), exc
        except redis.RedisError as exc:
            batch_fates, error = [UNKNOWN] * len(batch), exc
        fates += batch_fates
        if error is not None:
            return Sent(fates + [UNSENT] * (len(pushes) - len(fates)), error)
    return Sent(fates)


_GROUPS = (
    (UNKNOWN, "sent without a reply: they may or may not be in the queue (look before pushing "
              "them again)"),
    (UNCONFIRMED, "pushed, not confirmed by the replicas"),
    (REFUSED, "refused"),
    (UNSENT, "not sent"),
)


def report(items: Sequence[Item], fates: Sequence[str], *, ids: bool) -> str:
    """What a send that stopped early did, for its error line: how many were pushed, which
    inputs were refused, not sent or not answered, and which to push again. Pure."""
    done = sum(f in (PUSHED, EXISTING, UNCONFIRMED) for f in fates)
    parts = [f"pushed {done} of {len(items)} task(s)"
             + (" (their ids are on stdout)" if ids and done else "")]
    for fate, says in _GROUPS:
        group = [i for i, f in zip(items, fates, strict=True) if f == fate]
        if group:
            parts.append(f"{where(group)}: {says}")
    again = [i for i, f in zip(items, fates, strict=True) if f in (REFUSED, UNSENT)]
    if again:
        parts.append(f"push {where(again)} again")
    return "; ".join(parts)


class PartialPush(redis.RedisError):
    """A send stopped by `cause` after pushing some tasks (their ids are printed): the CLI's
    error line is the cause, then `report`."""

    def __init__(self, cause: redis.RedisError, report: str) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.report = report

    def message(self, reason: str) -> str:
        """The error line, `reason` being the cause as the CLI words it."""
        if isinstance(self.cause, producer.NotReplicated):
            reason = f"{self.cause}: the tasks may be lost if the master fails now"
        return f"{reason}; {self.report}"


def _print_ids(pushes: Sequence[producer.Push], fates: Sequence[str]) -> None:
    for push, fate in zip(pushes, fates, strict=True):
        if push.task_id and fate in (PUSHED, EXISTING, UNCONFIRMED):
            print(push.task_id)


def _plan(args: argparse.Namespace, kind: models.QueueType, prefix: str,
          items: list[Item]) -> list[producer.Push]:
    """The push of each item with the command's options; CliError naming the first item that
    cannot be pushed (nothing is sent then)."""
    now = time.time()
    pushes = []
    for item in items:
        try:
            pushes.append(producer.plan(
                args.key, item.text, priority=args.priority if kind == "zset" else None,
                task_id=args.task_id, delay=args.delay, at=args.at, unique_for=args.unique_for,
                key_prefix=prefix, now=now, track=args.track))
        except ValueError as exc:
            raise CliError(f"{where([item])}: {exc}; nothing was pushed", EXIT_USAGE) from None
    return pushes


def _check(args: argparse.Namespace, items: list[Item], options: bool) -> None:
    if args.task_id is not None and len(items) != 1:
        raise CliError(f"--id names one task; {len(items)} payloads given", EXIT_USAGE)
    if args.task_id is not None and not is_utf8(args.task_id):
        raise CliError(f"--id {args.task_id!r} is not UTF-8 text; use a text id", EXIT_USAGE)
    if args.raw and (options or args.task_id is not None or args.track):
        raise CliError("--raw pushes no envelope, so no id: drop it to use --in/--at/"
                       "--unique-for/--id/--track", EXIT_USAGE)


def run(target: Target, args: argparse.Namespace) -> int:
    client = target.connect(**producer.sent_once({}))
    kind = queue_type(client, target, args.key, args.priority)
    items = list(payloads(args.payloads, binary_stdin()))
    options = args.delay is not None or args.at is not None or args.unique_for is not None
    _check(args, items, options)
    prefix = (target.schema.prefix if target.schema is not None
              else getattr(args, "key_prefix", None) or args.key)
    if not options and args.task_id is None and not args.track:
        pushes = plain_pushes(args.key, kind, [i.text for i in items],
                              priority=args.priority or 0.0, raw=args.raw)
    else:
        pushes = _plan(args, kind, prefix, items)
    sent = send(client, pushes, wait_replicas=args.wait_replicas)
    _print_ids(pushes, sent.fates)
    if sent.error is not None:
        raise PartialPush(sent.error, report(items, sent.fates, ids=not args.raw))
    skipped = sent.fates.count(EXISTING)
    scheduled = bool(pushes) and pushes[0].target != args.key
    where_to = f"{prefix}:delayed (scheduled)" if scheduled else f"{args.key} ({kind})"
    print(f"enqueued {len(items) - skipped} task(s) to {where_to}"
          + (f"; {skipped} already enqueued (unique)" if skipped else ""), file=sys.stderr)
    return 0
