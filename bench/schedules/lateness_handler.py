"""The handler of the lateness benchmark: appends `<task id> <start - slot seconds>` to the file
$BENCH_LATENESS_FILE (the slot is the envelope's enqueue time, set by the operator)."""

from __future__ import annotations

import os
import time

from taskqueue.worker.handlers import TaskContext


def record(payload: str, context: TaskContext) -> None:
    started = time.time()
    with open(os.environ["BENCH_LATENESS_FILE"], "a", encoding="utf-8") as f:
        f.write(f"{context.id} {started - (context.enqueued_at or started):.6f}\n")
