"""The `taskqueue` console script: the CLI, and Ctrl-C at any moment is a quiet exit.

Importing this module first installs a SIGINT handler that only notes the signal, so nothing
can be interrupted half-imported; `main` then restores Python's own handler and raises a noted
Ctrl-C as KeyboardInterrupt, inside the `try` that also covers loading the CLI's modules (half
a second on a busy machine), the command, and its exit. So a Ctrl-C ends the process with one
line and exit code 130 (`stats --watch` exits 0), never with a KeyboardInterrupt traceback.
The interpreter's own start-up, before it runs any code of this project, is out of reach.
"""

from __future__ import annotations

import signal
import sys

_noted: list[int] = []


def _note(signum: int, _frame: object) -> None:
    """SIGINT before `main` runs: noted; `main` raises it."""
    _noted.append(signum)


signal.signal(signal.SIGINT, _note)  # before the next import: nothing may stop half-imported

from taskqueue.cli.errors import EXIT_INTERRUPTED  # noqa: E402


def main() -> None:
    """Run the CLI and exit with its code."""
    try:
        # Python's handler: commands see a Ctrl-C as KeyboardInterrupt (asyncio.run needs it)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if _noted:
            raise KeyboardInterrupt
        from taskqueue.cli.main import main as run  # the slow part: redis-py, pydantic...

        code = run()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: a late Ctrl-C changes nothing
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stderr.write("\ntaskqueue: interrupted\n")
        code = EXIT_INTERRUPTED
    sys.exit(code)


if __name__ == "__main__":
    main()
