"""The layout of the observe call that reports the quiesced workers (quiesce on real Redis:
tests/redis/queueops/test_quiesce.py)."""

from __future__ import annotations

from taskqueue.api import manifest
from taskqueue.redisio import queueops
from taskqueue.wire import keys


def _schema(*queues: str) -> keys.KeySchema:
    spec = {"redis": {"url": "redis://localhost"}, "queues": [{"key": q} for q in queues]}
    return keys.KeySchema.from_spec(manifest.parse({"kind": "TaskQueue", "spec": spec}).spec)


def test_the_observe_call_layout() -> None:
    schema = _schema("high", "low")
    keys_, args = queueops.observe_call(schema, (), horizon_ms=1234)
    assert keys_ == [schema.workers, schema.delayed, schema.dead_letter, schema.stats,
                     schema.quiesced, "high", "low"]
    fields = ["taken:high", "taken:low", "service_ms:high", "service_ms:low", "served:high",
              "served:low", "service_sq_ms2:high", "service_sq_ms2:low", "served_sq:high",
              "served_sq:low", *keys.wait_fields("high"), *keys.wait_fields("low"),
              "limited:high", "limited:low"]
    assert args == [2, len(fields), "list", "list", *fields, 1234]
    assert len(keys.OBSERVE_REPLY) == 8
