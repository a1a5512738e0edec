"""The `taskqueue` console script: parse, resolve the target, run, map errors to exit codes.

A command's module (and what it imports: redis-py, the models, the simulator) is imported only
when that command is named: `taskqueue --help` lists the commands from `COMMANDS`, and
`taskqueue <command> ...` builds the parser of that command alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, NoReturn

from taskqueue.cli.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    EXIT_WRONGTYPE,
    CliError,
)

if TYPE_CHECKING:
    import redis

    from taskqueue.cli.target import Target

Command = Callable[["Target", argparse.Namespace], int]

COMMANDS = {
    "enqueue": "push tasks to a queue",
    "stats": "queue statistics (--watch for live)",
    "inflight": "tasks held by each worker",
    "status": "where one task is, by id",
    "cancel": "cancel one task, by id",
    "dlq": "dead letters: list, requeue, purge",
    "drain": "delete a queue's tasks in batches",
    "pause": "stop workers taking from a queue (an incident)",
    "resume": "lift `taskqueue pause` of a queue",
    "schedules": "next slots of spec.schedules, in their zones and UTC",
    "simulate": "replay traffic against a manifest's scaling (no Redis, no cluster)",
    "console": "web console (read-only by default)",
}
"""Each command (the module `taskqueue.cli.<command>`, or MODULES') and its line in
`taskqueue --help`."""

MODULES = {"console": "webconsole"}
"""The commands whose module has another name (`taskqueue.cli.console` is the console script)."""

EPILOG = """exit codes: 0 ok, 1 failed, 2 usage, 3 bad manifest / unknown TaskQueue,
4 Redis unreachable, 5 wrong key type, 6 not confirmed (add --yes), 130 interrupted"""


class Parser(argparse.ArgumentParser):
    """argparse with a usage error on one line (`taskqueue enqueue: argument --in: ...`), exit 2;
    the subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (`{self.prog} -h` shows the usage)\n")


def named(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first argument when that is one of COMMANDS (the root
    parser takes no option but -h before it)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first if first in COMMANDS else None


def parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The parser of the command `argv` names (`named`); every other command is listed by its
    help line only."""
    root = Parser(
        prog="taskqueue", description="Inspect and operate the Redis queues of a TaskQueue.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = root.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS)
                              + "}")
    command = named(argv)
    for name, help_ in COMMANDS.items():
        if name == command:
            importlib.import_module(f"taskqueue.cli.{MODULES.get(name, name)}").add_parser(
                sub, help=help_)
        else:
            sub.add_parser(name, help=help_)
    return root


def redis_error(exc: redis.RedisError, resolved: Target) -> CliError:
    import redis

    from taskqueue.api import redact
    from taskqueue.cli.enqueue import PartialPush

    if isinstance(exc, PartialPush):  # the cause as below, then what was pushed
        cause = redis_error(exc.cause, resolved)
        return CliError(exc.message(cause.message), cause.code)
    where, why = redact.url(resolved.redis_url), redact.scrub(str(exc))
    if isinstance(exc, redis.AuthenticationError):
        return CliError(f"Redis at {where} refused the credentials: {why}",
                        EXIT_UNREACHABLE)
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return CliError(f"cannot reach Redis at {where}: {why}", EXIT_UNREACHABLE)
    if "EXEC without MULTI" in str(exc):  # MULTI was refused, and redis-py reports the EXEC
        exc = redis.exceptions.NoPermissionError(
            "this user has no permissions to run the 'multi' command")
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return CliError(f"the Redis user lacks a permission: {redact.scrub(str(exc))} (the "
                        "CLI's ACL rule: `python -m taskqueue.redisio.acl cli`, docs/install.md)",
                        EXIT_FAILURE)
    if isinstance(exc, redis.ResponseError) and "WRONGTYPE" in str(exc):
        return _wrong_type(resolved) or CliError(
            "WRONGTYPE: a key of this TaskQueue holds another type than expected "
            "(`redis-cli TYPE <key>` on its queues, <prefix>:workers, :delayed, :stats)",
            EXIT_WRONGTYPE)
    return CliError(f"Redis error: {why}", EXIT_FAILURE)


def _wrong_type(resolved: Target) -> CliError | None:
    """The key a bare WRONGTYPE (e.g. from a Lua script) was about, when it can be found."""
    import redis

    from taskqueue.cli import culprit

    if resolved.schema is None:
        return None
    try:
        return culprit.culprit(resolved.connect(), resolved.schema)
    except redis.RedisError:
        return None


def execute(args: argparse.Namespace) -> int:
    """Run the parsed command; every expected failure becomes a CliError."""
    standalone: Callable[[argparse.Namespace], int] | None = getattr(args, "run_standalone", None)
    if standalone is not None:  # needs no Redis target (simulate)
        return standalone(args)
    import redis  # the command's module has loaded it

    from taskqueue.cli import target

    resolved = target.resolve(args)
    run: Command = args.run
    try:
        return run(resolved, args)
    except redis.RedisError as exc:
        raise redis_error(exc, resolved) from None


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line, with the modules the command needs imported: its own (by
    `parser`) and pydantic's models when it reads a manifest (-f, --name). `console` calls this
    under a SIGINT handler that only notes a Ctrl-C: an interrupt inside a library's import can
    come out as another error."""
    args = parser(argv).parse_args(argv)
    if getattr(args, "file", None) or getattr(args, "name", None):
        importlib.import_module("taskqueue.api.manifest")
    return args


def run(args: argparse.Namespace) -> int:
    """Run the parsed command; its exit code, a CliError reported as one line."""
    try:
        return execute(args)
    except CliError as exc:
        sys.stderr.write(f"taskqueue: {exc.message}\n")
        return exc.code
    except KeyboardInterrupt:
        sys.stderr.write("\ntaskqueue: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_FAILURE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (the console script exits with it)."""
    return run(parse(sys.argv[1:] if argv is None else argv))


if __name__ == "__main__":
    sys.exit(main())
