"""The producer example pushes enveloped tasks (a real redis-server)."""

from __future__ import annotations

import importlib.util

import redis

from taskqueue.wire import keys
from tests.unit.chart.test_examples import EXAMPLES


def test_producer_pushes_enveloped_tasks(redis_url: str, redis_sync: redis.Redis) -> None:
    spec = importlib.util.spec_from_file_location("producer", EXAMPLES / "producer.py")
    assert spec and spec.loader
    producer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(producer)
    producer.main(redis_url)
    assert redis_sync.llen("emails:vip") == 1
    assert redis_sync.llen("emails:normal") == 100
    element = redis_sync.lindex("emails:vip", 0)
    assert element is not None
    assert "ceo@example.com" in keys.unwrap(element).payload
