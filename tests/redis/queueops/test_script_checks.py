"""No script fails half-way: Redis does not roll back a script that errors, so each one checks the
type of every key it writes, and the producer data it reads, before its first write. A key of
another type fails the call with nothing written (`WRONGTYPE key <key> holds a <type>, not a
<type>`); the refresh of leases skips a key that is not a lease. Real redis-server, the scripts
called as the worker and the producers call them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import redis

from taskqueue.wire import keys
from taskqueue.worker.resp import ReplyError
from taskqueue.worker.store import Store

SCHEMA = keys.KeySchema(prefix="t", dead_letter="t:dead", queues=(keys.QueueRef(key="q"),))
ENTRY = keys.Entry("q", "", keys.wrap("p", task_id="id1")).encode()
OWNER = "w#0"


@pytest.fixture
def store(redis_url: str) -> Iterator[Store]:
    s = Store(url=redis_url, schema=SCHEMA, worker_id="w")
    yield s
    s.close()


@dataclass(frozen=True)
class Case:
    """A script call whose key `bad` holds another type (a string, or a hash where a string
    belongs): what the call would have written before the command that fails on it."""

    bad: str
    setup: Callable[[redis.Redis], object]
    call: Callable[[Store], object]
    unwritten: Callable[[redis.Redis], bool]
    """True when the write the call would have made before its failing command is absent."""
    hash: bool = False


def _held(r: redis.Redis) -> object:
    return r.lpush(SCHEMA.processing("w"), ENTRY)


def _still_held(r: redis.Redis) -> bool:
    return r.lrange(SCHEMA.processing("w"), 0, -1) == [ENTRY.encode()]


def _claim(s: Store) -> object:
    return s.script("claim", [s.processing, SCHEMA.done("id1"), SCHEMA.running("id1"),
                              SCHEMA.delayed, SCHEMA.stats, SCHEMA.flow_state],
                    [ENTRY, OWNER, 15000, "1", int(time.time() * 1000), 1000])


def _complete(s: Store) -> object:
    return s.script("complete", [s.processing, SCHEMA.done("id1"), SCHEMA.running("id1"),
                                 SCHEMA.stats, SCHEMA.flow_state], [ENTRY, OWNER, 60000, 1, "1"])


def _unique_push(score: str) -> Callable[[Store], object]:
    def call(s: Store) -> object:
        how = "lpush" if score == "" else "zadd"
        return s.script("enqueue", ["q", SCHEMA.unique("u1")], [how, score or 0, "p", 60000, "u1"])

    return call


CASES = [
    pytest.param(Case(SCHEMA.stats,
                      lambda r: (_held(r), r.set(SCHEMA.done("id1"), 1)),
                      _claim, _still_held), id="claim-done-stats"),
    pytest.param(Case(SCHEMA.delayed,
                      lambda r: (_held(r), r.set(SCHEMA.running("id1"), "other#1", px=5000)),
                      _claim, _still_held), id="claim-deferred-delayed"),
    pytest.param(Case(SCHEMA.running("id1"), _held, _complete,
                      lambda r: not r.exists(SCHEMA.done("id1")) and _still_held(r), hash=True),
                 id="complete-running-key"),
    pytest.param(Case(SCHEMA.stats, lambda r: None,
                      lambda s: s.heartbeat(window=15, served=("service_ms:q", 5)),
                      lambda r: r.type(SCHEMA.workers) == b"none"), id="heartbeat-stats"),
    pytest.param(Case(SCHEMA.started("w"), lambda r: None,
                      lambda s: s.heartbeat(window=15, running_ms=(5000,)),
                      lambda r: r.type(SCHEMA.workers) == b"none", hash=True),
                 id="heartbeat-started"),
    pytest.param(Case("q", lambda r: None, _unique_push(""),
                      lambda r: not r.exists(SCHEMA.unique("u1"))), id="enqueue-unique-queue"),
    pytest.param(Case(SCHEMA.dead_letter,
                      lambda r: (r.lpush(SCHEMA.processing("gone"), ENTRY),
                                 r.zadd(SCHEMA.workers, {"gone": 1})),
                      lambda s: s.recover(worker_id="gone", max_attempts=1, reason="test"),
                      lambda r: r.llen(SCHEMA.processing("gone")) == 1), id="recover-dead-list"),
    pytest.param(Case(SCHEMA.stats, _held,
                      lambda s: s.release([ENTRY]), _still_held), id="release-stats"),
]


@pytest.mark.parametrize("case", CASES)
def test_a_key_of_another_type_fails_the_script_before_any_write(
        redis_url: str, store: Store, case: Case) -> None:
    r = redis.Redis.from_url(redis_url)
    case.setup(r)
    if case.hash:
        r.hset(case.bad, "f", "v")
    else:
        r.set(case.bad, "not mine")
    with pytest.raises(ReplyError, match="WRONGTYPE") as raised:
        case.call(store)
    assert case.unwritten(r)
    if not case.hash:  # a hash at a string's key fails Redis's own GET, before any write
        assert f"WRONGTYPE key {case.bad} holds a string, not a " in str(raised.value)
    r.close()


@pytest.mark.parametrize("score", ["nan", "soon", ""])
def test_a_unique_zadd_with_a_bad_score_leaves_no_unique_key(
        redis_url: str, store: Store, score: str) -> None:
    """Before: the unique key was set, then ZADD failed, and the producer's retry was a no-op
    ("already enqueued") for the whole window: the task was never pushed."""
    r = redis.Redis.from_url(redis_url)
    with pytest.raises(ReplyError) as raised:
        store.script("enqueue", ["z", SCHEMA.unique("u1")], ["zadd", score, "p", 60000, "u1"])
    assert not r.exists(SCHEMA.unique("u1")) and not r.exists("z")
    assert f'score "{score}" is not a number' in str(raised.value)
    r.close()


def test_a_key_that_is_not_a_lease_does_not_stop_the_refresh_of_the_others(
        redis_url: str, store: Store) -> None:
    r = redis.Redis.from_url(redis_url)
    r.hset(SCHEMA.running("a"), "f", "v")
    r.set(SCHEMA.running("b"), OWNER, px=1000)
    refreshed = store.script("lease", [SCHEMA.running("a"), SCHEMA.running("b")],
                             [60000, OWNER, OWNER])
    assert refreshed == 1
    assert r.pttl(SCHEMA.running("b")) > 30000
    assert r.type(SCHEMA.running("a")) == b"hash"
    r.close()


SCORES = ["0", "-0", "7", "-2.5", "+3", "1e+20", "1E5", ".5", "5.", "inf", "+inf", "-inf",
          "1e-310", "1e-400", "1e400", "nan", "NaN", "", " 5", "5 ", "1,5", "1.2.3", "e5", "5e",
          "--5", "+-5", "0x10", "infinity", "INF", "\u0661"]
STRICTER = {"0x10", "infinity", "INF"}
"""Scores ZADD takes that a delayed entry may not carry: Redis never writes them (docs/worker.md,
"Raw formats for producers in other languages")."""


def test_a_score_is_taken_exactly_when_redis_takes_it_as_redis_writes_it(
        redis_url: str, store: Store) -> None:
    r = redis.Redis.from_url(redis_url)
    differ = set()
    for score in SCORES:
        try:
            r.execute_command("ZADD", "scratch", score, "m")
            redis_takes = True
        except redis.ResponseError:
            redis_takes = False
        try:
            store.script("enqueue", ["z", SCHEMA.unique("x")], ["zadd", score, score, 0, ""])
            we_take = True
        except ReplyError as exc:
            assert "is not a number" in str(exc)
            we_take = False
        assert redis_takes or not we_take, f"{score!r} passes the check but ZADD refuses it"
        if redis_takes != we_take:
            differ.add(score)
    assert differ == STRICTER
    # every score Redis itself writes (a popped zset entry's score) passes
    for value in (0, -0.0, 7, -2.5, 1e20, 1e-20, 0.1, 2**53 + 1, float("inf"), float("-inf")):
        r.zadd("scratch", {"m": value})
        written = r.eval("return redis.call('ZPOPMIN', KEYS[1])[2]", 1, "scratch").decode()
        store.script("enqueue", ["z", SCHEMA.unique("x")], ["zadd", written, "p", 0, ""])
    r.close()
