"""A dead-letter record is never wrapped inside another one: a task whose payload is a record
(pushed back into a queue by hand, or taken from a dead-letter list that is also a queue) goes
to the dead-letter list as that record, byte-exact, from Python (the fail path, here) and from
Lua (recover.lua, put_back: tests/redis/queueops/test_dead_letter_records.py)."""

from __future__ import annotations

import json

import pytest

from taskqueue.wire import keys

RECORD = keys.dead_letter_record(
    entry=keys.Entry("q", "", "t"), task=keys.Task(payload="t \u00e9 \"quoted\"", id="i1"),
    attempts=3, error="ValueError: no", failed_at=1700000000.5)
LUA_RECORD = json.dumps({"id": "", "error": "worker lost", "attempts": 2, "failed_at": 1.0,
                         "payload": "x", "queue": "q"})  # cjson writes the fields in any order


@pytest.mark.parametrize("payload", [RECORD, LUA_RECORD], ids=["python-record", "lua-record"])
def test_the_fail_path_dead_letters_a_record_as_it_is(payload: str) -> None:
    again = keys.dead_letter_record(entry=keys.Entry("r", "", payload),
                                    task=keys.unwrap(payload), attempts=1, error="boom")
    assert again == payload


def test_any_other_payload_gets_a_record_of_its_own() -> None:
    task = keys.Task(payload='{"queue": "looks like one"}', id="i2")
    record = json.loads(keys.dead_letter_record(entry=keys.Entry("q", "", "x"), task=task,
                                                attempts=2, error="boom"))
    assert (record["queue"], record["payload"], record["id"]) == ("q", task.payload, "i2")
