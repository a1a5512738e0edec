"""`Store.transaction` (MULTI ... EXEC in one round trip) against a real redis-server: every
command applied together, and an aborted transaction leaves the connection answering the next
call with its own reply, not a stale one of the transaction's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from taskqueue.wire import keys
from taskqueue.worker import resp
from taskqueue.worker.store import Store

Q = "tx"
SCHEMA = keys.KeySchema(prefix=Q, queues=(keys.QueueRef(Q),), dead_letter=f"{Q}:dead")


@pytest.fixture
def store(redis_url: str) -> Iterator[Store]:
    s = Store(url=redis_url, schema=SCHEMA, worker_id="w-tx")
    yield s
    s.close()


def test_a_hash_is_written_with_its_ttl_in_one_transaction(store: Store,
                                                           redis_sync: redis.Redis) -> None:
    key = SCHEMA.progress("w-tx")
    replies = store.transaction(("HSET", key, "t1", "0.25"), ("PEXPIRE", key, 30_000))
    assert replies == [1, 1]
    assert redis_sync.hget(key, "t1") == "0.25"
    assert 0 < redis_sync.pttl(key) <= 30_000


def test_an_aborted_transaction_leaves_the_connection_in_step(store: Store,
                                                              redis_sync: redis.Redis) -> None:
    key = SCHEMA.progress("w-tx")
    # a command of the wrong arity is refused while queued: EXEC aborts, nothing is applied
    with pytest.raises(resp.ReplyError):
        store.transaction(("HSET", key, "t1"), ("PEXPIRE", key, 30_000))
    assert redis_sync.exists(key) == 0
    assert store.call("PING") == "PONG"
    assert store.transaction(("HSET", key, "t1", "0.5"), ("PEXPIRE", key, 30_000)) == [1, 1]
