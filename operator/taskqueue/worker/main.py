"""`taskqueue-worker`: run a worker for one TaskQueue until SIGTERM (`taskqueue.worker.command`).

This entry point imports the command with Python's cyclic garbage collector off: the imports
(redis-py, pydantic and the TaskQueue models) leave ~65,000 objects the collector tracks, which
live as long as the process, and collecting while they are created only scans them again and
again (about a tenth of the worker's start). Once imported they are frozen out of the collector's
reach (`gc.freeze`) and the collector is on again for what tasks allocate.
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
    return command.main(argv)


if __name__ == "__main__":
    sys.exit(main())
