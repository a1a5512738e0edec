"""A dead-letter record is never wrapped inside another one: a task whose payload is a record
(pushed back into a queue by hand, or taken from a dead-letter list that is also a queue) goes
to the dead-letter list as that record, byte-exact, from Python (fail path) and from Lua
(recover.lua, put_back), which recognise a record by the same rule."""

from __future__ import annotations

import json
from importlib import resources

import pytest
import redis.asyncio as aioredis

from taskqueue.redisio import queueops
from taskqueue.wire import keys
from tests.unit.queueops.test_dead_letter_records import LUA_RECORD, RECORD

# text -> is it a dead-letter record (the same answer in Python and in Lua)
RECOGNISED = [
    pytest.param(RECORD, True, id="python-record"),
    pytest.param(LUA_RECORD, True, id="lua-record-other-order"),
    pytest.param(json.dumps({**json.loads(RECORD), "payload": RECORD}), True, id="nested-record"),
    pytest.param(json.dumps({**json.loads(RECORD), "extra": 1}), False, id="an-extra-field"),
    pytest.param(json.dumps({k: v for k, v in json.loads(RECORD).items() if k != "id"}), False,
                 id="a-missing-field"),
    pytest.param(json.dumps({**json.loads(RECORD), "payload": 5}), False,
                 id="payload-not-a-string"),
    pytest.param(" " + RECORD, False, id="leading-space"),
    pytest.param(RECORD[:-1], False, id="truncated"),
    pytest.param("[1, 2]", False, id="a-list"),
    pytest.param("plain payload", False, id="plain-text"),
    pytest.param(keys.wrap("x", task_id="e"), False, id="an-envelope"),
    pytest.param("{}", False, id="empty-object"),
]


def is_record_in_lua_source() -> str:
    lib = resources.files("taskqueue.wire").joinpath("lua/lib/entry.lua").read_text("utf-8")
    return lib + "\nif is_dead_record(ARGV[1]) then return 1 end\nreturn 0\n"


@pytest.mark.parametrize("text, expected", RECOGNISED)
async def test_python_and_lua_recognise_the_same_records(
        redis_client: aioredis.Redis, text: str, expected: bool) -> None:
    assert keys.is_dead_letter_record(text) is expected
    assert await redis_client.eval(is_record_in_lua_source(), 0, text) == int(expected)


@pytest.mark.parametrize("element", [
    pytest.param(RECORD, id="raw-record"),
    pytest.param(keys.wrap(RECORD, attempts=1, task_id="e1"), id="record-in-an-envelope"),
])
@pytest.mark.parametrize("queue", ["q", "gone"], ids=["poison", "queue-left-the-spec"])
async def test_recover_dead_letters_a_record_as_it_is(
        redis_client: aioredis.Redis, element: str, queue: str) -> None:
    schema = keys.KeySchema(prefix="q", queues=(keys.QueueRef("q"),), dead_letter="q:dead")
    await redis_client.lpush(schema.processing("w"), keys.Entry(queue, "", element).encode())
    requeued, dead = await queueops.recover_worker(redis_client, schema, worker_id="w",
                                                   max_attempts=1, reason="test")
    assert (requeued, dead) == (0, 1)
    assert await redis_client.lrange(schema.dead_letter, 0, -1) == [RECORD]
