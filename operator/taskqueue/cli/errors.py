"""Errors the CLI reports as one line on stderr, and the exit code of each kind."""

from __future__ import annotations

EXIT_FAILURE = 1
"""The command ran but could not do what was asked (e.g. a task id not in the dead letters)."""
EXIT_USAGE = 2
"""Bad flags (argparse uses 2 too)."""
EXIT_TARGET = 3
"""Bad manifest, unknown TaskQueue, unreadable Secret or kubeconfig."""
EXIT_UNREACHABLE = 4
"""Redis cannot be reached (refused, timeout, DNS, auth)."""
EXIT_WRONGTYPE = 5
"""A key holds another type than the command works on (WRONGTYPE)."""
EXIT_REFUSED = 6
"""A destructive command was not confirmed (no --yes and no terminal, or the answer was no)."""
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A failure to report as `taskqueue: <message>` with exit code `code`."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def wrong_type(key: str, found: str, wanted: str) -> CliError:
    return CliError(
        f"WRONGTYPE: key {key!r} holds a {found}, not a {wanted}; check the key name",
        EXIT_WRONGTYPE,
    )
