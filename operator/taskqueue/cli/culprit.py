"""Which key of a TaskQueue holds the wrong type: the name a bare WRONGTYPE does not give.

A Lua script (observe.lua behind `stats`) fails with `WRONGTYPE Operation against a key holding
the wrong kind of value` and no key name; `culprit` asks Redis the TYPE of each key the schema
names (queues, bookkeeping keys, dead letters, the processing lists of registered workers) and
returns the first that is neither absent nor of its expected type (`KeySchema.expected_types`).
"""

from __future__ import annotations

from typing import Any

import redis

from taskqueue.cli.errors import CliError, wrong_type
from taskqueue.cli.records import to_bytes
from taskqueue.wire import keys

PROCESSING_CHECKED = 1000
"""Processing lists checked at most (one per registered worker)."""


def culprit(client: redis.Redis, schema: keys.KeySchema) -> CliError | None:
    """A CliError naming the first key of the wrong type, None when every key is fine."""
    wanted = schema.expected_types()
    if str(client.type(to_bytes(schema.workers))) == wanted[schema.workers]:
        members: Any = client.zrange(schema.workers, 0, PROCESSING_CHECKED - 1)
        wanted = schema.expected_types(processing=[schema.processing(str(w)) for w in members])
    for key, kind in wanted.items():
        found = str(client.type(to_bytes(key)))
        if found not in ("none", kind):
            return wrong_type(key, found, kind)
    return None
