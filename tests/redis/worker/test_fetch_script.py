"""fetch.lua called as the worker calls it (`store.Store`, its pre-encoded EVALSHA) and as the
tools call it (`scripts.fetch_args`), on a real redis-server: the queue options travel as one
packed argument ("<type>:<limit>:<take>" per queue, `scripts.fetch_options`) and the acks are
every argument after the fixed ones, so what is taken, skipped, acked and promoted does not
depend on how many queues or acks a call carries."""

from __future__ import annotations

import time

import pytest
import redis

from taskqueue.wire import keys, scripts
from taskqueue.worker.store import Store
from tests.unit.queueops.test_keys_and_queueops import _spec


def _entry(queue: str, element: str, score: str = "") -> str:
    return keys.Entry(queue, score, element).encode()


def _taken(result: list[str]) -> list[tuple[str, str]]:
    return [(e.queue, e.element) for e in map(keys.Entry.decode, result)]


@pytest.mark.parametrize(
    ("queues", "backlog", "count", "expected"),
    [
        pytest.param([{"key": "a"}, {"key": "b"}], {"a": ["a1", "a2"], "b": ["b1"]}, 3,
                     [("a", "a1"), ("a", "a2"), ("b", "b1")], id="strict-priority"),
        pytest.param([{"key": "a", "starvationLimit": 2}, {"key": "b"}],
                     {"a": ["a1", "a2", "a3", "a4"], "b": ["b1", "b2"]}, 5,
                     [("a", "a1"), ("a", "a2"), ("b", "b1"), ("b", "b2"), ("a", "a3")],
                     id="starvation-limit-2-then-the-later-queue-drained"),
        pytest.param([{"key": "a", "starvationLimit": 12}, {"key": "b"}],
                     {"a": [f"a{i}" for i in range(14)], "b": ["b1"]}, 14,
                     [("a", f"a{i}") for i in range(12)] + [("b", "b1"), ("a", "a12")],
                     id="two-digit-limit"),
        pytest.param([{"key": "z", "type": "zset"}, {"key": "l"}],
                     {"z": ["z1"], "l": ["l1"]}, 2, [("z", "z1"), ("l", "l1")],
                     id="zset-then-list"),
        pytest.param([{"key": f"q{i}"} for i in range(12)], {"q11": ["last"]}, 1,
                     [("q11", "last")], id="twelfth-of-twelve-queues"),
        pytest.param([{"key": "app:jobs:high"}, {"key": "app:jobs:low", "type": "zset"}],
                     {"app:jobs:low": ["x"]}, 1, [("app:jobs:low", "x")],
                     id="keys-with-colons"),
    ],
)
def test_the_packed_queue_options_decide_what_is_taken(
        redis_url: str, redis_sync: redis.Redis, queues: list[dict[str, object]],
        backlog: dict[str, list[str]], count: int, expected: list[tuple[str, str]]) -> None:
    schema = _spec(queues=queues)
    for q in schema.queues:
        for score, element in enumerate(backlog.get(q.key, [])):
            if q.type == "zset":
                redis_sync.zadd(q.key, {element: score})
            else:
                redis_sync.lpush(q.key, element)
    store = Store(url=redis_url, schema=schema, worker_id="w")
    try:
        taken = _taken(store.fetch(acks=(), count=count))
    finally:
        store.close()
    assert taken == expected
    assert redis_sync.llen(schema.processing("w")) == len(expected)


def test_a_skipped_queue_is_not_taken_from_but_its_due_entries_go_back(
        redis_url: str, redis_sync: redis.Redis) -> None:
    """take "0" in the options: the key holds another type, the worker takes nothing there,
    yet the queue is still declared, so a due retry of it goes back to it, not to the
    dead-letter list as a stranger's."""
    schema = _spec(queues=[{"key": "a"}, {"key": "b"}, {"key": "c"}])
    redis_sync.lpush("a", "a1")
    redis_sync.lpush("c", "c1")
    redis_sync.zadd(schema.delayed, {_entry("b", "b-retry"): 1})
    store = Store(url=redis_url, schema=schema, worker_id="w")
    try:
        store.use_queues(skip=("a",))
        assert _taken(store.fetch(acks=(), count=5)) == [("c", "c1")]
        store.promote()
    finally:
        store.close()
    assert redis_sync.lrange("a", 0, -1) == ["a1"]
    assert redis_sync.lrange("b", 0, -1) == ["b-retry"]
    assert redis_sync.llen(schema.dead_letter) == 0


@pytest.mark.parametrize("nacks", [0, 1, 7, 300])
def test_every_argument_after_the_fixed_ones_is_an_ack(
        redis_url: str, redis_sync: redis.Redis, nacks: int) -> None:
    schema = _spec(queues=[{"key": "a", "starvationLimit": 1}, {"key": "b"}])
    proc = schema.processing("w")
    held = [_entry("a", f"h{i}") for i in range(nacks)]
    if held:
        redis_sync.lpush(proc, *held, _entry("a", "kept"))
    redis_sync.lpush("a", "a1", "a2")
    redis_sync.lpush("b", "b1")
    store = Store(url=redis_url, schema=schema, worker_id="w")
    try:
        taken = _taken(store.fetch(acks=held, count=3))
    finally:
        store.close()
    assert taken == [("a", "a1"), ("b", "b1"), ("a", "a2")]
    assert int(redis_sync.hget(schema.stats, "completed") or 0) == nacks
    left = [keys.Entry.decode(e).element for e in redis_sync.lrange(proc, 0, -1)]
    assert sorted(left) == sorted(["a1", "b1", "a2"] + (["kept"] if held else []))


@pytest.mark.parametrize(
    ("now", "count", "promoted", "taken"),
    [
        pytest.param(None, 1, False, [("a", "a1")], id="no-now-takes-without-promoting"),
        pytest.param("now", 0, True, [], id="count-0-promotes-and-takes-nothing"),
        pytest.param("now", 2, True, [("a", "due"), ("a", "a1")], id="promotes-then-takes"),
    ],
)
def test_now_and_count_as_the_tools_pass_them(
        redis_url: str, redis_sync: redis.Redis, now: str | None, count: int, promoted: bool,
        taken: list[tuple[str, str]]) -> None:
    """`scripts.fetch_args` (what the tools send) over a plain client: the same layout the
    worker's pre-encoded call has. A promoted list entry goes to the served end."""
    schema = _spec(queues=[{"key": "a"}])
    redis_sync.lpush("a", "a1")
    redis_sync.zadd(schema.delayed, {_entry("a", "due"): 1})
    now_ms = int(time.time() * 1000) if now else None
    fetch_keys = scripts.fetch_keys(schema, "w")
    result = redis_sync.eval(scripts.lua("fetch"), len(fetch_keys), *fetch_keys,
                             *scripts.fetch_args(schema, now_ms=now_ms, count=count, hold=True))
    assert _taken(result) == taken
    assert redis_sync.zcard(schema.delayed) == (0 if promoted else 1)


def test_the_worker_sends_the_layout_the_tools_send(redis_url: str) -> None:
    """The worker's pre-encoded head and `scripts.fetch_args` agree on every argument before
    the acks (one layout, two encoders)."""
    schema = _spec(queues=[{"key": "a", "starvationLimit": 4}, {"key": "z", "type": "zset"}])
    store = Store(url=redis_url, schema=schema, worker_id="w")
    store.use_queues(skip=("z",))
    fetch_keys = scripts.fetch_keys(schema, "w")
    args = scripts.fetch_args(schema, now_ms=None, count=0, hold=True, skip=("z",))
    head = ["EVALSHA", scripts.script("fetch").sha, len(fetch_keys), *fetch_keys, *args[:2]]
    assert store._fetch_head == b"".join(b"$%d\r\n%s\r\n" % (len(str(a).encode()),
                                                            str(a).encode()) for a in head)
    assert store._fetch_fixed == len(head) + 4 == 3 + len(fetch_keys) + len(args)
    assert store._tracking == b"$0\r\n\r\n" and args[5] == ""  # tracking off: ARGV[6] ""
    tracked = Store(url=redis_url, schema=schema, worker_id="w", tracking=True)
    assert scripts.fetch_args(schema, now_ms=None, count=0, hold=True,
                              tracking=True)[5] == tracked.tracking == schema.task_prefix
