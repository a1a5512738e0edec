"""`taskqueue pause|resume QUEUE`: the incident pause beside spec.queues[].paused, as the fetch
script and the operator read it."""

from __future__ import annotations

from collections.abc import Callable

import redis

from taskqueue.wire import flow
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
