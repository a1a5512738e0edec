"""Celery app of the benchmark (redis broker from $BENCH_REDIS_URL, no result backend)."""

from __future__ import annotations

import os

from celery import Celery

app = Celery("bench", broker=os.environ["BENCH_REDIS_URL"])
app.conf.task_ignore_result = True
app.conf.worker_hijack_root_logger = False


@app.task(name="noop", queue="bq_celery")
def noop() -> None:
    """Nothing."""
