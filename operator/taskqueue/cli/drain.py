"""`taskqueue drain KEY`: empty a queue in small batches, never one blocking DEL of a huge key.

Deleting a list of millions of elements with DEL blocks Redis for seconds. A drain removes the
elements the key held when it started, oldest (lowest score) first, `batch` at a time (LTRIM
for a list, ZREMRANGEBYRANK for a zset, each O(batch)). Tasks pushed to a list meanwhile are
kept (in a zset they may score lower and go instead). When the last batch is all
the key holds, the key is UNLINKed (freed off the main thread). The plan is pure (`plan`);
`run_drain` does the I/O.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import redis

from taskqueue.cli import ui
from taskqueue.cli.errors import EXIT_USAGE, CliError, wrong_type
from taskqueue.cli.target import Target, target_options

DEFAULT_BATCH = 1000


def plan(length: int, batch: int) -> list[int]:
    """Sizes of the successive removals that empty `length` elements, none over `batch`."""
    if batch < 1:
        raise ValueError("batch must be >= 1")
    full, rest = divmod(max(length, 0), batch)
    return [batch] * full + ([rest] if rest else [])


def key_length(client: redis.Redis, key: str) -> tuple[str, int]:
    """(type, length) of `key`; WRONGTYPE CliError unless it is a list, a zset or missing."""
    kind = str(client.type(key))
    if kind == "list":
        return kind, int(client.llen(key))
    if kind == "zset":
        return kind, int(client.zcard(key))
    if kind == "none":
        return kind, 0
    raise wrong_type(key, kind, "list or zset")


def remove_batch(client: redis.Redis, key: str, kind: str, size: int, remaining: int) -> str:
    """Remove `size` of the oldest elements; UNLINK the key if they are all that is left."""
    if size < remaining:  # not the last batch: one O(size) command
        if kind == "list":
            client.ltrim(key, 0, -(size + 1))
            return "LTRIM"
        client.zremrangebyrank(key, 0, size - 1)
        return "ZREMRANGEBYRANK"
    with client.pipeline(transaction=True) as pipe:
        while True:  # the last batch: UNLINK unless tasks arrived meanwhile (checked atomically)
            try:
                pipe.watch(key)  # type: ignore[no-untyped-call]
                length = int(pipe.llen(key) if kind == "list" else pipe.zcard(key))
                pipe.multi()
                if length <= size:
                    pipe.unlink(key)
                    op = "UNLINK"
                elif kind == "list":
                    pipe.ltrim(key, 0, -(size + 1))
                    op = "LTRIM"
                else:
                    pipe.zremrangebyrank(key, 0, size - 1)
                    op = "ZREMRANGEBYRANK"
                pipe.execute()
                return op
            except redis.WatchError:
                continue


def run_drain(client: redis.Redis, key: str, *, batch: int, expected: int | None = None,
              on_batch: Callable[[int, str], None] | None = None) -> int:
    """Remove the elements `key` holds now (or `expected` of them); returns how many."""
    kind, length = key_length(client, key)
    total = length if expected is None else min(expected, length)
    done = 0
    for size in plan(total, batch):
        op = remove_batch(client, key, kind, size, total - done)
        done += size
        if on_batch is not None:
            on_batch(done, op)
    return done


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("drain", parents=target_options(), help=help,
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("key", metavar="KEY", help="the queue (list or zset) to empty")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH,
                   help=f"elements removed per command (default {DEFAULT_BATCH})")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")
    p.set_defaults(run=run)


def run(target: Target, args: argparse.Namespace) -> int:
    if args.batch < 1:
        raise CliError("--batch must be >= 1", EXIT_USAGE)
    client = target.connect()
    return drain_key(client, args.key, batch=args.batch, yes=args.yes, what="tasks")


def drain_key(client: redis.Redis, key: str, *, batch: int, yes: bool, what: str) -> int:
    """Confirm, drain with a progress bar, print the summary (shared with `dlq purge`)."""
    kind, length = key_length(client, key)
    if length == 0:
        print(f"{key}: already empty")
        return 0
    ui.confirm(f"Delete {length} {what} from {key} ({kind})?", yes=yes)
    progress = ui.Progress(length, f"draining {key}")
    removed = run_drain(client, key, batch=batch, expected=length,
                        on_batch=lambda done, _op: progress.update(done))
    _, left = key_length(client, key)
    kept = f"; {left} pushed meanwhile were kept" if left else ""
    progress.finish()
    print(f"{key}: removed {removed} {what} in {len(plan(length, batch))} "
                    f"batch(es) of <= {batch}{kept}")
    return 0
