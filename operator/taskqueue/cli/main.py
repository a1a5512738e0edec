"""The `taskqueue` console script: parse, resolve the target, run, map errors to exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

import redis

from taskqueue.api import redact
from taskqueue.api.manifest import ManifestError
from taskqueue.cli import (
    culprit,
    dlq,
    drain,
    enqueue,
    inflight,
    schedules,
    simulate,
    stats,
    target,
)
from taskqueue.cli.errors import (
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_TARGET,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    EXIT_WRONGTYPE,
    CliError,
)

Command = Callable[[target.Target, argparse.Namespace], int]

EPILOG = """exit codes: 0 ok, 1 failed, 2 usage, 3 bad manifest / unknown TaskQueue,
4 Redis unreachable, 5 wrong key type, 6 not confirmed (add --yes), 130 interrupted"""


class Parser(argparse.ArgumentParser):
    """argparse with a usage error on one line (`taskqueue enqueue: argument --in: ...`), exit 2;
    the subcommands' parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (`{self.prog} -h` shows the usage)\n")


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    target.add_arguments(common)
    root = Parser(
        prog="taskqueue", description="Inspect and operate the Redis queues of a TaskQueue.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = root.add_subparsers(dest="command", required=True,
                              metavar="{enqueue,stats,inflight,dlq,drain,schedules,simulate}")
    for module in (enqueue, stats, inflight, dlq, drain, schedules):
        module.add_parser(sub, [common])
    simulate.add_parser(sub)
    return root


def _redis_error(exc: redis.RedisError, resolved: target.Target) -> CliError:
    if isinstance(exc, enqueue.PartialPush):  # the cause as below, then what was pushed
        cause = _redis_error(exc.cause, resolved)
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


def _wrong_type(resolved: target.Target) -> CliError | None:
    """The key a bare WRONGTYPE (e.g. from a Lua script) was about, when it can be found."""
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
    try:
        resolved = target.resolve(args)
    except ManifestError as exc:
        raise CliError(f"bad manifest: {exc}", EXIT_TARGET) from None
    except OSError as exc:
        raise CliError(f"cannot read manifest: {exc}", EXIT_TARGET) from None
    run: Command = args.run
    try:
        return run(resolved, args)
    except redis.RedisError as exc:
        raise _redis_error(exc, resolved) from None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (the console script exits with it)."""
    args = parser().parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
