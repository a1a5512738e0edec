"""The operator's history appends ride the observe call (`queueops.observe_appending`) on a real
redis-server: one pipeline, written once even when the script must be loaded again, a refused
append does not fail the read, and MAXLEN ~ keeps the streams capped."""

from __future__ import annotations

import redis
import redis.asyncio as aioredis

from taskqueue.redisio import queueops
from taskqueue.wire import history
from tests.unit.queueops.test_quiesce import _schema

SCHEMA = _schema("q")
APPENDS = (history.Append(SCHEMA.decisions, {"t": "1", "rule": "scale-up"}, 10),
           history.Append(SCHEMA.history, {"t": "2", "dt": "10000"}, 10))


def calls(r: redis.Redis, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


async def test_the_appends_go_with_the_observe_call(redis_client: aioredis.Redis,
                                                    redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", "a", "b")
    await queueops.observe(redis_client, SCHEMA)  # scripts loaded, the worker set learnt
    redis_sync.config_resetstat()
    obs, refused = await queueops.observe_appending(redis_client, SCHEMA, appends=APPENDS)
    assert obs.backlog == {"q": 2}
    assert refused == (None, None)
    assert (calls(redis_sync, "evalsha"), calls(redis_sync, "xadd")) == (1, 2)
    assert [f for _, f in redis_sync.xrange(SCHEMA.decisions)] == [APPENDS[0].fields]
    assert [f for _, f in redis_sync.xrange(SCHEMA.history)] == [APPENDS[1].fields]


async def test_a_script_loaded_again_appends_once(redis_client: aioredis.Redis,
                                                  redis_sync: redis.Redis) -> None:
    redis_sync.script_flush()  # a restarted or failed-over server: NOSCRIPT, then loaded
    obs, refused = await queueops.observe_appending(redis_client, SCHEMA, appends=APPENDS)
    assert obs.backlog == {"q": 0} and refused == (None, None)
    assert redis_sync.xlen(SCHEMA.decisions) == redis_sync.xlen(SCHEMA.history) == 1


async def test_a_refused_append_is_named_and_the_read_goes_on(redis_client: aioredis.Redis,
                                                              redis_sync: redis.Redis) -> None:
    redis_sync.set(SCHEMA.history, "not a stream")
    obs, refused = await queueops.observe_appending(redis_client, SCHEMA, appends=APPENDS)
    assert obs.backlog == {"q": 0}
    assert refused[0] is None
    assert isinstance(refused[1], redis.ResponseError) and "WRONGTYPE" in str(refused[1])
    assert redis_sync.xlen(SCHEMA.decisions) == 1
    assert redis_sync.get(SCHEMA.history) == "not a stream"


async def test_maxlen_keeps_a_stream_capped(redis_client: aioredis.Redis,
                                            redis_sync: redis.Redis) -> None:
    # MAXLEN ~ trims whole listpack nodes (stream-node-max-entries, 100 by default)
    for i in range(20):
        batch = [history.Append(SCHEMA.decisions, {"t": str(i * 50 + j)}, 100)
                 for j in range(50)]
        await queueops.observe_appending(redis_client, SCHEMA, appends=batch)
    assert 100 <= redis_sync.xlen(SCHEMA.decisions) < 200
    assert redis_sync.xrevrange(SCHEMA.decisions, count=1)[0][1] == {"t": "999"}
