"""Log format of the worker: plain text or one JSON object per line (`--log-json`), in the
schema shared with the operator (`taskqueue.telemetry.logfmt`).

Lines about a task carry `task_id`, `queue` and `attempt` (as JSON fields, and in the text).
"""

from __future__ import annotations

from typing import Any

from taskqueue.telemetry import logfmt
from taskqueue.telemetry.logfmt import JsonFormatter

__all__ = ["JsonFormatter", "setup", "task_extra"]


def task_extra(*, task_id: str, queue: str, attempt: int, **more: Any) -> dict[str, Any]:
    """`extra=` of a log call about one task."""
    return {"task_id": task_id or "-", "queue": queue, "attempt": attempt, **more}


def setup(*, json_lines: bool, level: str = "INFO") -> None:
    logfmt.setup(json_lines=json_lines, level=level)
