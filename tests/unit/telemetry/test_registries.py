"""The worker's and the operator's registries share no metric (`taskqueue.telemetry.metrics`);
tests/redis/telemetry and tests/cluster/telemetry scrape the two processes."""

from __future__ import annotations

import re

from prometheus_client import generate_latest

from taskqueue.telemetry import metrics

ANY_NAME = re.compile(r"^# TYPE (taskqueue_\w+)", re.MULTILINE)


def names(text: str) -> set[str]:
    return set(ANY_NAME.findall(text))


def test_the_two_registries_share_no_metric() -> None:
    worker = names(generate_latest(metrics.WORKER).decode())
    operator = names(generate_latest(metrics.OPERATOR).decode())
    assert worker and operator
    assert worker.isdisjoint(operator)
    assert all(n.startswith("taskqueue_worker_") for n in worker)
    assert not any(n.startswith("taskqueue_worker_") for n in operator)
