"""The one log format of both processes (worker and operator): plain text, or one JSON object
per line with the same schema (documented in docs/observability.md):

    {"time": "2026-01-01T12:00:00.123Z", "level": "INFO", "logger": "taskqueue.worker",
     "message": "...", <context fields>, "exc": "<traceback>"}

Context fields appear when the record carries them: `task_id`, `queue`, `attempt`, `worker_id`,
`error` (a line about a task, from `extra=`) and `object` (kopf's object reference).
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any

CONTEXT_FIELDS = ("task_id", "queue", "attempt", "worker_id", "error")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def timestamp(created: float) -> str:
    """RFC 3339 in UTC with milliseconds: `2026-01-01T12:00:00.123Z`."""
    moment = datetime.datetime.fromtimestamp(created, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, then the context fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": timestamp(record.created), "level": record.levelname,
            "logger": record.name, "message": record.getMessage(),
        }
        for name in CONTEXT_FIELDS:
            if name in record.__dict__:
                data[name] = record.__dict__[name]
        k8s_ref = getattr(record, "k8s_ref", None)
        if k8s_ref:
            data["object"] = k8s_ref
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False, default=str)


def setup(*, json_lines: bool, level: str = "INFO", quiet: tuple[str, ...] = ()) -> None:
    """Log to stderr in one of the two formats; `quiet` loggers only from WARNING up."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in quiet:
        logging.getLogger(name).setLevel(logging.WARNING)
