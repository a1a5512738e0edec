"""Which key of a TaskQueue holds the wrong type: the name a bare WRONGTYPE does not give.

A Lua script (observe.lua behind `stats`) fails with `WRONGTYPE Operation against a key holding
the wrong kind of value` and no key name; `culprit` asks Redis the TYPE of each key the schema
names (queues, workers, delayed, dead letters, counters, the processing lists of registered
workers) and returns the first that is neither absent nor of its expected type.
"""

from __future__ import annotations

from typing import Any

import redis

from taskqueue.cli.errors import CliError, wrong_type
from taskqueue.cli.records import to_bytes
from taskqueue.wire import keys

PROCESSING_CHECKED = 1000
"""Processing lists checked at most (one per registered worker)."""


def expected_types(schema: keys.KeySchema) -> list[tuple[str, str]]:
    """(key, type) of every fixed key of the TaskQueue, in the order observe.lua reads them."""
    return [
        *((q.key, q.type) for q in schema.queues),
        (schema.workers, "zset"),
        (schema.delayed, "zset"),
        (schema.dead_letter, "list"),
        (schema.stats, "hash"),
        (schema.starvation, "hash"),
        (schema.flow, "hash"),
        (schema.flow_state, "hash"),
    ]


def culprit(client: redis.Redis, schema: keys.KeySchema) -> CliError | None:
    """A CliError naming the first key of the wrong type, None when every key is fine."""
    wanted = expected_types(schema)
    for key, kind in wanted:
        found = str(client.type(to_bytes(key)))
        if found not in ("none", kind):
            return wrong_type(key, found, kind)
    if str(client.type(to_bytes(schema.workers))) == "zset":
        members: Any = client.zrange(schema.workers, 0, PROCESSING_CHECKED - 1)
        for worker in members:
            key = schema.processing(str(worker))
            found = str(client.type(to_bytes(key)))
            if found not in ("none", "list"):
                return wrong_type(key, found, "list")
    return None
