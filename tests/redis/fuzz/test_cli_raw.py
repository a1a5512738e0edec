"""Fuzz: the `taskqueue` CLI on any raw data in a TaskQueue's keys (tests/redis/fuzz/rawdata.py).

Each command runs in-process (`taskqueue.cli.main.main(argv)`) on a generated World and must end
with a defined exit code and at most one line on stderr, never a traceback. The read-only ones
(`stats`, `inflight`, `dlq list`) change nothing in Redis; `dlq requeue --all` loses no record
(each is back in its queue or still in the list) and changes no key's type; `drain` empties its
queue and touches no other key.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from tests.fixtures.redis_server import RedisServer
from tests.redis.fuzz import rawdata
from tests.redis.fuzz.budget import examples
from tests.redis.fuzz.inprocess import Outcome, run_cli

EXIT_CODES = {0: "ok", 1: "failed", 5: "wrong key type"}
"""The exit codes a command may end with on a reachable Redis and a valid target."""


def assert_one_line(outcome: Outcome, *, per_record: bool = False) -> None:
    """A defined exit code, no traceback, one line on stderr when it failed (`per_record`: one
    line per record it kept, as `dlq requeue` reports them)."""
    assert outcome.code in EXIT_CODES, outcome
    assert "Traceback" not in outcome.err and "Traceback" not in outcome.out, outcome
    lines = outcome.err.splitlines()
    assert all(line.startswith("taskqueue: ") for line in lines), outcome.err
    assert len(lines) <= 1 or (per_record and all(
        line.startswith("taskqueue: kept ") for line in lines[:-1])), outcome.err
    assert (outcome.code == 0) == (outcome.err == ""), outcome


def _not_json(constant: str) -> None:
    raise AssertionError(f"{constant} is not JSON")


@pytest.fixture
def raw(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def _target(url: str) -> list[str]:
    return ["--redis-url", url, "--queue", "q", "--zset-queue", "z", "--queue", "h"]


READ_ONLY = [
    ("stats", "--json", "--interval", "0"),
    ("stats", "--interval", "0"),
    ("inflight", "--json"),
    ("inflight",),
    ("dlq", "list", "--json", "--limit", "0"),
    ("dlq", "list"),
]


@examples(80)
@given(world=rawdata.worlds(), command=st.sampled_from(READ_ONLY))
def test_reading_commands_end_in_one_line_and_write_nothing(
        raw: redis.Redis, redis_server: RedisServer, world: rawdata.World,
        command: tuple[str, ...]) -> None:
    raw.flushall()
    rawdata.write(raw, world, now_ms=int(time.time() * 1000))
    before = rawdata.dump(raw)
    outcome = run_cli(*command[:2 if command[0] == "dlq" else 1], *_target(redis_server.url),
                  *command[2 if command[0] == "dlq" else 1:])
    assert_one_line(outcome)
    if outcome.code == 0 and "--json" in command:
        json.loads(outcome.out, parse_constant=_not_json)
    assert rawdata.dump(raw) == before


@examples(50)
@given(world=rawdata.worlds())
def test_requeue_loses_no_dead_letter_and_changes_no_key_type(
        raw: redis.Redis, redis_server: RedisServer, world: rawdata.World) -> None:
    raw.flushall()
    rawdata.write(raw, world, now_ms=int(time.time() * 1000))
    world = rawdata.effective(world)
    types = rawdata.key_types(raw)
    outcome = run_cli("dlq", "requeue", *_target(redis_server.url), "--all")
    assert_one_line(outcome, per_record=True)
    assert rawdata.lost(world, rawdata.found(raw)) == []
    assert rawdata.type_changes(types, rawdata.key_types(raw)) == []


@examples(30)
@given(world=rawdata.worlds(), queue=st.sampled_from(["q", "z", "h"]))
def test_drain_empties_its_queue_and_nothing_else(
        raw: redis.Redis, redis_server: RedisServer, world: rawdata.World, queue: str) -> None:
    raw.flushall()
    rawdata.write(raw, world, now_ms=int(time.time() * 1000))
    before = rawdata.dump(raw)
    outcome = run_cli("drain", *_target(redis_server.url), "--yes", "--batch", "2", queue)
    assert_one_line(outcome)
    after = rawdata.dump(raw)
    assert {k: v for k, v in after.items() if k != queue} == {
        k: v for k, v in before.items() if k != queue}
    if outcome.code == 0:
        assert queue not in after
    else:
        assert after == before
