"""`taskqueue pause|resume QUEUE`: the incident pause beside spec.queues[].paused, as the fetch
script and the operator read it."""

from __future__ import annotations

import getpass
from collections.abc import Callable

import redis

from taskqueue.wire import flow, keys
from taskqueue.worker.store import Store
from tests.helpers.cli import Run


def test_pause_then_resume_writes_and_lifts_only_the_cli_pause(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    path = manifest_file()
    result = cli("pause", "normal", "-f", path)
    assert result.code == 0, result.err
    assert "paused normal" in result.out
    record = redis_sync.hget("vip:flow", flow.PAUSED_CLI + "normal")
    assert record is not None and len(str(record).split()) == 2
    assert "already paused" in cli("pause", "normal", "-f", path).out
    result = cli("resume", "normal", "-f", path)
    assert (result.code, result.out.strip()) == (0, "resumed normal")
    assert not redis_sync.exists("vip:flow") or not redis_sync.hexists(
        "vip:flow", flow.PAUSED_CLI + "normal")


def test_resume_says_when_the_spec_still_pauses_the_queue(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    redis_sync.hset("vip:flow", flow.PAUSED + "vip", flow.PAUSED_BY_SPEC)
    result = cli("resume", "vip", "-f", manifest_file())
    assert result.code == 1
    assert "spec.queues[].paused still pauses it" in result.out
    assert redis_sync.hget("vip:flow", flow.PAUSED + "vip") == "spec"


def test_an_unknown_queue_is_refused_naming_the_queues(
    cli: Run, manifest_file: Callable[..., str]
) -> None:
    result = cli("pause", "nope", "-f", manifest_file())
    assert result.code == 2
    assert "'nope' is not a queue of this TaskQueue; use one of ['vip', 'normal']" in result.err


def test_a_flow_key_of_another_type_is_named(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    redis_sync.set("vip:flow", "x")
    result = cli("pause", "vip", "-f", manifest_file())
    assert result.code == 5
    assert "vip:flow" in result.err


def test_stats_shows_pauses_and_in_flight_against_the_limit(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    redis_sync.hset("vip:flow", mapping={flow.MAX + "vip": "10", flow.RATE + "normal": "50 1 50"})
    redis_sync.hset("vip:flowstate", flow.HELD + "vip", "7")
    path = manifest_file()
    assert cli("pause", "normal", "-f", path).code == 0
    out = cli("stats", "-f", path, "--interval", "0").out
    rows = {line.split()[0]: line for line in out.splitlines()[3:5]}
    assert rows["vip"].endswith("7/10 in flight")
    assert rows["normal"].endswith("paused, 50/s")
    snap = cli("stats", "-f", path, "--interval", "0", "--json").json()
    normal = snap["queues"][1]["flow"]
    assert (normal["paused"], normal["paused_by_spec"], normal["rate_per_second"]) == (
        True, False, 50.0)


def test_stats_shows_what_real_fetches_held_back_in_flight_and_paused(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis, redis_url: str
) -> None:
    """The numbers come from fetch.lua itself: vip has maxInFlight 2 and 5 tasks, a worker's
    fetch of 5 takes 2 (3 held back) and a second takes none (3 more); normal is paused with
    `taskqueue pause` and a fetch of 5 leaves its 4 tasks (4 held back). `taskqueue stats`
    shows per queue the held-back count, in flight against the limit, and the pause."""
    schema = keys.KeySchema(prefix="vip", dead_letter="vip:dead",
                            queues=(keys.QueueRef(key="vip"), keys.QueueRef(key="normal")))
    path = manifest_file()
    redis_sync.hset("vip:flow", flow.MAX + "vip", "2")
    redis_sync.lpush("vip", *[keys.wrap(f"v{i}") for i in range(5)])
    store = Store(url=redis_url, schema=schema, worker_id="w")
    try:
        assert len(store.fetch(acks=[], count=5)) == 2
        assert store.fetch(acks=[], count=5) == []
        assert cli("pause", "normal", "-f", path).code == 0
        redis_sync.lpush("normal", *[keys.wrap(f"n{i}") for i in range(4)])
        assert store.fetch(acks=[], count=5) == []  # vip at its limit, normal paused
    finally:
        store.close()
    result = cli("stats", "-f", path, "--interval", "0")
    assert result.code == 0, result.err
    rows = {line.split()[0]: line for line in result.out.splitlines()[3:5]}
    assert rows["vip"].endswith("2/2 in flight, 9 held back")  # 3 + 3 + 3 (its 3 left)
    assert rows["normal"].endswith("paused, 4 held back")
    snap = cli("stats", "-f", path, "--interval", "0", "--json").json()
    vip, normal = snap["queues"]
    assert (vip["limited_total"], vip["flow"]["in_flight"], vip["flow"]["max_in_flight"]) == (
        9, 2, 2)
    assert (normal["limited_total"], normal["flow"]["paused"]) == (4, True)
    assert str(normal["flow"]["paused_by_cli"]).split()[1] == getpass.getuser()  # who paused
