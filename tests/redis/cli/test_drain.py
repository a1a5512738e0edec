"""`taskqueue drain`: batches of LTRIM/ZREMRANGEBYRANK then UNLINK, never one DEL."""

from __future__ import annotations

import redis

from taskqueue.cli import drain
from tests.helpers.cli import Run
from tests.unit.cli.test_drain import BIG


def _fill_list(r: redis.Redis, key: str, n: int) -> None:
    pipe = r.pipeline(transaction=False)
    for start in range(0, n, 10_000):
        pipe.rpush(key, *(f"task-{i}" for i in range(start, min(start + 10_000, n))))
    pipe.execute()


def _calls(r: redis.Redis) -> dict[str, int]:
    stats = r.info("commandstats")
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def test_a_200k_list_goes_in_batches_without_a_del(
    cli: Run, redis_url: str, redis_sync: redis.Redis
) -> None:
    _fill_list(redis_sync, "jobs", BIG)
    redis_sync.config_resetstat()
    result = cli("drain", "--redis-url", redis_url, "jobs", "--yes")
    assert result.code == 0, result.err
    assert result.out == f"jobs: removed {BIG} tasks in 200 batch(es) of <= 1000\n"
    assert redis_sync.exists("jobs") == 0
    calls = _calls(redis_sync)
    assert "del" not in calls
    assert (calls["ltrim"], calls["unlink"]) == (199, 1)


def test_the_length_falls_one_batch_at_a_time(redis_sync: redis.Redis, redis_url: str) -> None:
    _fill_list(redis_sync, "jobs", 20_000)
    observer = redis.Redis.from_url(redis_url)
    seen: list[tuple[int, str]] = []
    drain.run_drain(redis_sync, "jobs", batch=1000,
                    on_batch=lambda _done, op: seen.append((observer.llen("jobs"), op)))
    observer.close()
    assert seen == [(20_000 - 1000 * i, "LTRIM") for i in range(1, 20)] + [(0, "UNLINK")]


def test_tasks_pushed_during_the_drain_are_kept(
    redis_sync: redis.Redis, redis_url: str
) -> None:
    _fill_list(redis_sync, "jobs", 5000)
    producer = redis.Redis.from_url(redis_url)

    def produce(done: int, _op: str) -> None:
        if done == 1000:
            producer.lpush("jobs", "new-1", "new-2")

    removed = drain.run_drain(redis_sync, "jobs", batch=1000, on_batch=produce)
    producer.close()
    assert removed == 5000
    assert redis_sync.lrange("jobs", 0, -1) == ["new-2", "new-1"]


def test_a_zset_queue_goes_by_rank(cli: Run, redis_url: str, redis_sync: redis.Redis) -> None:
    redis_sync.zadd("urgent", {f"t{i}": i for i in range(2500)})
    redis_sync.config_resetstat()
    result = cli("drain", "--redis-url", redis_url, "urgent", "--yes", "--batch", "1000")
    assert result.out == "urgent: removed 2500 tasks in 3 batch(es) of <= 1000\n"
    assert redis_sync.exists("urgent") == 0
    calls = _calls(redis_sync)
    assert (calls["zremrangebyrank"], calls["unlink"], "del" in calls) == (2, 1, False)


def test_refuses_without_yes_when_stdin_is_not_a_terminal(
    cli: Run, redis_url: str, redis_sync: redis.Redis
) -> None:
    redis_sync.rpush("jobs", "a", "b")
    result = cli("drain", "--redis-url", redis_url, "jobs")
    assert result.code == 6
    assert result.err == (
        "taskqueue: Delete 2 tasks from jobs (list)? — refusing without --yes "
        "(stdin is not a terminal)\n"
    )
    assert redis_sync.llen("jobs") == 2


def test_an_empty_key_needs_no_confirmation(cli: Run, redis_url: str) -> None:
    result = cli("drain", "--redis-url", redis_url, "jobs")
    assert (result.code, result.out) == (0, "jobs: already empty\n")


def test_wrong_type(cli: Run, redis_url: str, redis_sync: redis.Redis) -> None:
    redis_sync.hset("jobs", "a", "1")
    result = cli("drain", "--redis-url", redis_url, "jobs", "--yes")
    assert result.code == 5
    assert "key 'jobs' holds a hash, not a list or zset" in result.err
    assert redis_sync.exists("jobs") == 1
