"""The operator's Redis pool on a real redis-server: hundreds of TaskQueues polling one Redis at
once wait for one of `POOL_CONNECTIONS` connections instead of failing (redis-py's default pool
raises MaxConnectionsError at its 101st command in flight, which the poll reported as
RedisUnreachable)."""

from __future__ import annotations

import asyncio

import redis

from taskqueue.controller.redisurls import POOL_CONNECTIONS, RedisPools


def _client_ids(url: str) -> list[int]:
    return [int(c["id"]) for c in redis.Redis.from_url(url).client_list()]


async def test_more_concurrent_commands_than_connections_all_answered(redis_url: str) -> None:
    # the session's server may still hold earlier tests' clients: count only ids issued after now
    before = max(_client_ids(redis_url))
    pools = RedisPools()
    client = pools.get(redis_url)
    try:
        # 300 commands in flight at once, each held 50 ms by Redis
        replies = await asyncio.gather(*(client.execute_command("EVAL", "return 1", 0)
                                         for _ in range(300)),
                                       *(client.blpop([f"none{i}"], timeout=0.05)
                                         for i in range(300)))
        opened = [i for i in _client_ids(redis_url) if i > before]
    finally:
        await pools.close()
    assert replies[:300] == [1] * 300 and replies[300:] == [None] * 300
    assert 0 < len(opened) - 1 <= POOL_CONNECTIONS  # less the listing's own client
    assert redis.Redis.from_url(redis_url).ping()
