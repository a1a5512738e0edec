"""`taskqueue pause QUEUE` / `taskqueue resume QUEUE`: stop and restart taking from one queue
of a TaskQueue, for an incident, without changing the CR.

The pause is a field of the TaskQueue's flow-control hash that only this command writes
(`paused-cli:<queue>`, with when and by whom); the operator writes spec.queues[].paused into
another field and never touches this one, so it does not undo the pause, and `resume` lifts only
this pause (it says when spec.queues[].paused still holds the queue). Workers stop taking from
the queue at their next fetch (the fetch script reads the hash); tasks in hand finish; nothing
is lost. See docs/worker.md "Flow control".
"""

from __future__ import annotations

import argparse
import getpass
import time
from collections.abc import Callable

from taskqueue.cli.errors import EXIT_USAGE, CliError
from taskqueue.cli.target import Target, target_options
from taskqueue.redisio import flowops


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    add_command(sub, "pause", run_pause, help=help)


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
                run: Callable[[Target, argparse.Namespace], int], *, help: str) -> None:
    """`taskqueue pause` or `taskqueue resume` (`taskqueue.cli.resume`)."""
    p = sub.add_parser(name, parents=target_options(), help=help, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("queue_key", metavar="QUEUE", help="key of one of the TaskQueue's queues")
    p.set_defaults(run=run)


def _queue(target: Target, args: argparse.Namespace, command: str) -> str:
    schema = target.require_schema(command)
    if args.queue_key not in schema.queue_keys:
        raise CliError(f"{command}: {args.queue_key!r} is not a queue of this TaskQueue; use "
                       f"one of {list(schema.queue_keys)}", EXIT_USAGE)
    return str(args.queue_key)


def run_pause(target: Target, args: argparse.Namespace) -> int:
    queue = _queue(target, args, "pause")
    schema = target.require_schema("pause")
    new = flowops.pause(target.connect(), schema, queue, at=time.time(), who=_who())
    print(f"paused {queue}: workers take nothing from it (tasks in hand finish); "
          f"`taskqueue resume {queue}` lifts it" if new else
          f"{queue} was already paused by `taskqueue pause`")
    return 0


def run_resume(target: Target, args: argparse.Namespace) -> int:
    queue = _queue(target, args, "resume")
    schema = target.require_schema("resume")
    removed, by_spec = flowops.resume(target.connect(), schema, queue)
    done = f"resumed {queue}" if removed else f"{queue} was not paused by `taskqueue pause`"
    if by_spec:
        print(f"{done}; spec.queues[].paused still pauses it: set it to false in the TaskQueue")
        return 1
    print(done)
    return 0


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "?"
