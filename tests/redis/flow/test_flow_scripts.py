"""Flow control inside the scripts, on a real redis-server: the fetch script's rate limit (GCRA,
Redis clock), in-flight limit and pauses, priority among what the limits allow, and the in-flight
count kept by every script a held task leaves through (ack, complete, fail, claim, release,
recover), so that it never leaks. The scripts are called as the worker calls them (`Store`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from taskqueue.redisio import flowops
from taskqueue.wire import flow, keys, scripts
from taskqueue.worker.flowseen import FlowSeen
from taskqueue.worker.flowwatch import FlowWatch
from taskqueue.worker.resp import ReplyError
from taskqueue.worker.store import Store

SCHEMA = keys.KeySchema(prefix="t", dead_letter="t:dead",
                        queues=(keys.QueueRef(key="a"), keys.QueueRef(key="b")))


@pytest.fixture
def r(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


@pytest.fixture
def store(redis_url: str) -> Iterator[Store]:
    s = Store(url=redis_url, schema=SCHEMA, worker_id="w")
    yield s
    s.close()


def push(r: redis.Redis, queue: str, n: int) -> None:
    r.lpush(queue, *[keys.wrap(f"{queue}{i}", task_id=f"{queue}{i}") for i in range(n)])


def queues_of(entries: list[str]) -> list[str]:
    return [keys.Entry.decode(e).queue for e in entries]


def held(r: redis.Redis, queue: str = "a") -> int:
    return int(r.hget(SCHEMA.flow_state, flow.HELD + queue) or 0)


def test_without_limits_nothing_is_read_or_written_beyond_the_tasks(
        r: redis.Redis, store: Store) -> None:
    push(r, "a", 3)
    assert queues_of(store.fetch(acks=[], count=5)) == ["a"] * 3
    assert store.flow_wait_ms == 0
    assert not r.exists(SCHEMA.flow, SCHEMA.flow_state)


def test_a_rate_limit_gives_its_burst_then_says_when_the_next_task_may_start(
        r: redis.Redis, store: Store) -> None:
    r.hset(SCHEMA.flow, flow.RATE + "a", flow.rate_text(10, 1.0, 3))
    push(r, "a", 20)
    assert len(store.fetch(acks=[], count=20)) == 3
    assert 0 < store.flow_wait_ms <= 100
    assert store.fetch(acks=[], count=20) == []
    assert 0 < store.flow_wait_ms <= 100
    time.sleep(store.flow_wait_ms / 1000)
    assert len(store.fetch(acks=[], count=20)) >= 1


def test_an_empty_rate_limited_queue_asks_for_no_wait(r: redis.Redis, store: Store) -> None:
    r.hset(SCHEMA.flow, flow.RATE + "a", flow.rate_text(1, 60.0, 1))
    push(r, "a", 1)
    assert len(store.fetch(acks=[], count=5)) == 1
    assert store.flow_wait_ms == 0


def test_lower_priority_queues_serve_what_the_limit_holds_back(
        r: redis.Redis, store: Store) -> None:
    r.hset(SCHEMA.flow, flow.RATE + "a", flow.rate_text(10, 1.0, 2))
    push(r, "a", 10)
    push(r, "b", 10)
    assert queues_of(store.fetch(acks=[], count=5)) == ["a", "a", "b", "b", "b"]


def test_starvation_limits_hold_among_the_tasks_the_limits_allow(
        redis_url: str, r: redis.Redis) -> None:
    schema = keys.KeySchema(prefix="t", dead_letter="t:dead", queues=(
        keys.QueueRef(key="a", starvation_limit=2), keys.QueueRef(key="b")))
    s = Store(url=redis_url, schema=schema, worker_id="w")
    r.hset(schema.flow, flow.MAX + "b", "1")
    push(r, "a", 10)
    push(r, "b", 10)
    try:
        assert queues_of(s.fetch(acks=[], count=7)) == ["a", "a", "b", "a", "a", "a", "a"]
    finally:
        s.close()


@pytest.mark.parametrize("field", [flow.PAUSED + "a", flow.PAUSED_CLI + "a"])
def test_a_paused_queue_gives_nothing_until_resumed_and_keeps_its_order(
        r: redis.Redis, store: Store, field: str) -> None:
    push(r, "a", 3)
    push(r, "b", 1)
    r.hset(SCHEMA.flow, field, "spec")
    assert queues_of(store.fetch(acks=[], count=5)) == ["b"]
    assert store.fetch(acks=[], count=5) == []
    assert r.llen("a") == 3
    r.hdel(SCHEMA.flow, field)
    taken = [keys.unwrap(keys.Entry.decode(e).element).payload
             for e in store.fetch(acks=[], count=5)]
    assert taken == ["a0", "a1", "a2"]


def test_an_in_flight_limit_counts_held_tasks_only(r: redis.Redis, store: Store) -> None:
    r.hset(SCHEMA.flow, flow.MAX + "a", "2")
    push(r, "a", 5)
    assert len(store.fetch(acks=[], count=5)) == 2
    assert held(r) == 2
    assert queues_of(store.fetch(acks=[], count=5)) == []
    unheld = store.fetch(acks=[], count=5, hold=False)
    assert len(unheld) == 3 and held(r) == 2


# -- every way a held task leaves lowers the count --------------------------------------------
def _ack(s: Store, entry: str) -> object:
    return s.fetch(acks=[entry], count=0)


def _complete(s: Store, entry: str) -> object:
    return s.script("complete", [s.processing, SCHEMA.done("x"), SCHEMA.running("x"),
                                 SCHEMA.stats, SCHEMA.flow_state], [entry, "w#0", 60000, 1, "1"])


def _fail(dead: bool) -> Callable[[Store, str], object]:
    def call(s: Store, entry: str) -> object:
        return s.fail(entry=entry, held=True, dead=dead, value=entry if not dead else "{}",
                      due_ms=int(time.time() * 1000) + 60_000)
    return call


def _claim_done(s: Store, entry: str) -> object:
    s.call("SET", SCHEMA.done("a0"), "1")
    return s.script("claim", [s.processing, SCHEMA.done("a0"), SCHEMA.running("a0"),
                              SCHEMA.delayed, SCHEMA.stats, SCHEMA.flow_state],
                    [entry, "w#0", 15000, "1", int(time.time() * 1000), 1000])


def _claim_deferred(s: Store, entry: str) -> object:
    s.call("SET", SCHEMA.running("a0"), "other#0", "PX", 60000)
    return s.script("claim", [s.processing, SCHEMA.done("a0"), SCHEMA.running("a0"),
                              SCHEMA.delayed, SCHEMA.stats, SCHEMA.flow_state],
                    [entry, "w#0", 15000, "1", int(time.time() * 1000), 1000])


def _release(s: Store, entry: str) -> object:
    return s.release([entry])


LEAVES: dict[str, Callable[[Store, str], object]] = {
    "ack": _ack, "complete": _complete, "fail-retry": _fail(False), "fail-dead": _fail(True),
    "claim-done": _claim_done, "claim-deferred": _claim_deferred, "release": _release}


@pytest.mark.parametrize("leave", LEAVES.values(), ids=LEAVES.keys())
def test_a_task_leaving_its_processing_list_frees_its_place(
        r: redis.Redis, store: Store, leave: Callable[[Store, str], object]) -> None:
    r.hset(SCHEMA.flow, flow.MAX + "a", "2")
    push(r, "a", 5)
    first, _ = store.fetch(acks=[], count=5)
    assert held(r) == 2
    leave(store, first)
    assert held(r) == 1
    assert len(store.fetch(acks=[], count=5)) == 1
    assert held(r) == 2


def test_recovering_a_dead_worker_frees_every_place_it_held(
        r: redis.Redis, store: Store) -> None:
    r.hset(SCHEMA.flow, flow.MAX + "a", "3")
    push(r, "a", 5)
    assert len(store.fetch(acks=[], count=5)) == 3
    keys_, args = scripts.recover_call(SCHEMA, worker_id="w", max_attempts=5, reason="test")
    assert r.eval(scripts.lua("recover"), len(keys_), *keys_, *args) == [3, 0]
    assert held(r) == 0
    assert r.llen("a") == 5


def test_a_place_given_back_twice_never_counts_below_zero(r: redis.Redis, store: Store) -> None:
    r.hset(SCHEMA.flow, flow.MAX + "a", "1")
    push(r, "a", 1)
    (entry,) = store.fetch(acks=[], count=1)
    r.hset(SCHEMA.flow_state, flow.HELD + "a", 0)  # counted lower by hand meanwhile
    store.fetch(acks=[entry], count=0)
    assert held(r) == 0


@pytest.mark.parametrize("bad", [SCHEMA.flow, SCHEMA.flow_state])
def test_a_flow_key_of_another_type_fails_the_fetch_before_any_write(
        r: redis.Redis, store: Store, bad: str) -> None:
    push(r, "a", 2)
    r.set(bad, "not mine")
    with pytest.raises(ReplyError, match=f"WRONGTYPE key {bad} holds a string, not a hash"):
        store.fetch(acks=[], count=2)
    assert r.llen("a") == 2 and not r.exists(store.processing)


# -- what the worker has seen (worker.flowseen, worker.flowwatch) --------------------------------
def test_the_flow_thread_names_the_paused_queues(redis_url: str, r: redis.Redis) -> None:
    """No flow hash: nothing paused; a CLI pause names the paused queue (the blocking pops leave
    it out); the resume deletes the last field, and with it the hash; a control hash of another
    type pauses nothing here (fetch.lua names it)."""
    seen = FlowSeen()
    watch = FlowWatch(url=redis_url, schema=SCHEMA, worker_id="w", seen=seen,
                      stopping=threading.Event())
    try:
        watch.step()
        assert seen.paused == frozenset()
        assert flowops.pause(r, SCHEMA, "b", at=time.time(), who="test")
        watch.step()
        assert seen.paused == frozenset({"b"})
        assert seen.unpaused(SCHEMA.queue_keys) == ("a",)
        assert flowops.resume(r, SCHEMA, "b") == (True, False)
        watch.step()
        assert seen.paused == frozenset() and not r.exists(SCHEMA.flow)
        r.set(SCHEMA.flow, "not a hash")
        watch.step()
        assert seen.paused == frozenset()
    finally:
        watch.store.close()


def test_the_first_pause_or_limit_holds_from_the_next_fetch(r: redis.Redis, store: Store) -> None:
    """With no flow key and no cancel the fetch reads one EXISTS of them; the first pause or
    limit written into such a TaskQueue holds from the very next fetch (nothing the worker must
    hear first), and removing the last one frees the fetches again."""
    push(r, "a", 6)
    assert queues_of(store.fetch(acks=[], count=1)) == ["a"]
    r.hset(SCHEMA.flow, flow.PAUSED_CLI + "a", "0 test")
    assert store.fetch(acks=[], count=1) == []
    r.delete(SCHEMA.flow)
    r.hset(SCHEMA.flow, flow.RATE + "a", flow.rate_text(1, 60.0, 2))
    assert queues_of(store.fetch(acks=[], count=5)) == ["a", "a"]  # burst 2 of 1 a minute
    assert store.fetch(acks=[], count=5) == [] and store.flow_wait_ms > 0
    r.delete(SCHEMA.flow, SCHEMA.flow_state)
    assert queues_of(store.fetch(acks=[], count=5)) == ["a", "a", "a"]


def test_an_unused_fetch_runs_one_command_for_flow_and_cancels(
        r: redis.Redis, store: Store) -> None:
    """The cost when unused, counted exactly (INFO commandstats): no flow key and no cancel, a
    fetch taking one task runs one EXISTS for the three and no TYPE or ZCARD of the cancels
    zset; a pending cancel brings back its check."""
    push(r, "a", 3)
    store.fetch(acks=[], count=1)  # loads the script
    r.config_resetstat()
    store.fetch(acks=[], count=1)
    stats = r.info("commandstats")
    assert stats["cmdstat_exists"]["calls"] == 1
    assert "cmdstat_zcard" not in stats
    r.zadd(SCHEMA.cancels, {"someone-else": 1})
    r.config_resetstat()
    store.fetch(acks=[], count=1)
    stats = r.info("commandstats")
    assert stats["cmdstat_zcard"]["calls"] == 1


# -- tasks delayed by a limit (stats limited:<queue>, the operator's taskqueue_queue_limited) ----
def test_the_tasks_a_limit_or_pause_holds_back_are_counted(r: redis.Redis, store: Store) -> None:
    """A fetch counts, per queue, the tasks it could have taken that a limit or pause held back
    (bounded by the queue's length); without flow control nothing is counted."""
    field = keys.LIMITED_FIELD_PREFIX + "a"
    push(r, "a", 2)
    store.fetch(acks=[], count=5)
    assert not r.hexists(SCHEMA.stats, field)
    push(r, "a", 10)
    r.hset(SCHEMA.flow, flow.RATE + "a", flow.rate_text(1, 60.0, 2))
    assert queues_of(store.fetch(acks=[], count=5)) == ["a", "a"]
    assert r.hget(SCHEMA.stats, field) == "3"  # 5 wanted, 2 allowed
    r.hset(SCHEMA.flow, flow.PAUSED_CLI + "a", "0 test")
    push(r, "b", 1)
    assert queues_of(store.fetch(acks=[], count=20)) == ["b"]
    assert r.hget(SCHEMA.stats, field) == "11"  # + the 8 left in the queue, all held back
    assert not r.hexists(SCHEMA.stats, keys.LIMITED_FIELD_PREFIX + "b")


async def test_the_operator_reads_the_held_back_count_in_its_observe_call(
        redis_url: str, r: redis.Redis) -> None:
    import redis.asyncio as aioredis

    from taskqueue.redisio import queueops

    r.hset(SCHEMA.stats, keys.LIMITED_FIELD_PREFIX + "a", 7)
    client = aioredis.Redis.from_url(redis_url, decode_responses=True)
    try:
        observation = await queueops.observe(client, SCHEMA)
    finally:
        await client.aclose()
    assert observation.limited == {"a": 7}
