"""The `taskqueue` console script: the CLI, and Ctrl-C at any moment is a quiet exit.

Importing this module first installs a SIGINT handler that only notes the signal. The CLI's
modules load under it (the parser, and while the command line is parsed the named command's
modules: redis-py, and pydantic for a manifest): a KeyboardInterrupt raised inside a library's
import can come out as another error (pydantic-core reports one raised while it builds a
validator as a SchemaError). `main` then restores Python's own handler, raises a noted Ctrl-C as
KeyboardInterrupt, and runs the command inside the same `try`. So a Ctrl-C ends the
process with one line and exit code 130 (`stats --watch` exits 0), never with a traceback; one
that comes while the CLI loads takes effect when it has loaded. The interpreter's own start-up,
before it runs any code of this project, is out of reach.
"""

from __future__ import annotations

# signal.py's C half, loaded with the interpreter: `import signal` would first load enum and
# operator, milliseconds during which a Ctrl-C would still be a traceback
import _signal  # type: ignore[import-not-found]
import sys

_noted: list[int] = []


def _note(signum: int, _frame: object) -> None:
    """SIGINT before the command runs: noted; `main` raises it once the CLI has loaded."""
    _noted.append(signum)


_signal.signal(_signal.SIGINT, _note)  # before anything else of the CLI is imported

from taskqueue.cli.errors import EXIT_INTERRUPTED  # noqa: E402


def main() -> None:
    """Run the CLI and exit with its code."""
    try:
        from taskqueue.cli import main as cli

        args = cli.parse(sys.argv[1:])  # loads the named command's modules
        # Python's handler: commands see a Ctrl-C as KeyboardInterrupt (asyncio.run needs it)
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        if _noted:
            raise KeyboardInterrupt
        code = cli.run(args)
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # done: a late Ctrl-C changes nothing
    except KeyboardInterrupt:
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
        sys.stderr.write("\ntaskqueue: interrupted\n")
        code = EXIT_INTERRUPTED
    sys.exit(code)


if __name__ == "__main__":
    main()
