"""Log format of the worker: plain text or one JSON object per line (`--log-json`).

Lines about a task carry `task_id`, `queue` and `attempt` (as JSON fields, and in the text).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

TASK_FIELDS = ("task_id", "queue", "attempt", "worker_id", "error")


def task_extra(*, task_id: str, queue: str, attempt: int, **more: Any) -> dict[str, Any]:
    """`extra=` of a log call about one task."""
    return {"task_id": task_id or "-", "queue": queue, "attempt": attempt, **more}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the task fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": self.formatTime(record), "level": record.levelname,
            "logger": record.name, "message": record.getMessage(),
        }
        for name in TASK_FIELDS:
            if name in record.__dict__:
                data[name] = record.__dict__[name]
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False, default=str)


def setup(*, json_lines: bool, level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
