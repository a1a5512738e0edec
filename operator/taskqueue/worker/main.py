"""`taskqueue-worker`: run a worker for one TaskQueue until SIGTERM (`taskqueue.worker.command`).

This entry point imports the command with Python's cyclic garbage collector off: what the
imports create lives as long as the process, and collecting while it is created only scans it
again and again (about a tenth of the start when the command imported redis-py, pydantic and the
models, ~65,000 tracked objects; a pod's worker now loads none of them, a worker validating a
manifest loads pydantic later, in `config.from_spec`). Once imported they are frozen out of the
collector's reach (`gc.freeze`) and the collector is on again for what tasks allocate.

After the drain, threads a handler left running that are not daemons would keep the interpreter
from ending: `watchdog.leave` names them and exits without waiting.
"""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    gc.disable()
    try:
        from taskqueue.worker import command
    finally:
        gc.freeze()
        gc.enable()
    status = command.main(argv)
    from taskqueue.worker import watchdog

    return watchdog.leave(status)


if __name__ == "__main__":
    sys.exit(main())
