"""The history and decision-log formats (`taskqueue.wire.history`): what is written is what is read
back, unknown fields are ignored, and a broken entry names its field."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from taskqueue.wire import history

ENTRY = history.DecisionEntry(
    t=1_767_225_600_123, previous=3, replicas=1, recommendation=1, rule="scale-down",
    reason="demand 4 / target 10 = 1; scale down 3 -> 1", backlog=4, inflight=0,
    quiesced=("w-abc", "w-def"), removed=2)
POINT = history.HistoryPoint(
    t=1_767_225_610_000, dt=10_004, desired=4, replicas=5, ready=4, inflight=7, workers=4,
    completed=52, failed=1, queues={
        "{emails}:vip": history.QueuePoint(backlog=3, arrived=40, attempts=53, service_ms=10_600,
                                           service_sq_ms2=2_250_000, oldest_ms=1_200,
                                           p95_wait_ms=900),
        "{emails}:bulk": history.QueuePoint(backlog=0, arrived=0, attempts=None, service_ms=None,
                                            service_sq_ms2=None, oldest_ms=None,
                                            p95_wait_ms=None)})


def test_a_decision_entry_round_trips() -> None:
    fields = ENTRY.fields()
    assert list(fields) == list(history.DECISION_FIELDS)
    assert fields["from"] == "3" and fields["to"] == "1" and fields["quiesced"] == "w-abc w-def"
    assert history.DecisionEntry.decode(fields) == ENTRY


@pytest.mark.parametrize("entry", [
    pytest.param(dataclasses.replace(ENTRY, backlog=None, inflight=None, quiesced=()),
                 id="redis-unreadable-nothing-quiesced"),
    pytest.param(dataclasses.replace(ENTRY, reason="ünïcode; a = b"), id="any-reason"),
])
def test_unknown_values_are_empty_strings_and_come_back_as_none(
        entry: history.DecisionEntry) -> None:
    assert history.DecisionEntry.decode(entry.fields()) == entry


def test_a_history_point_round_trips_with_its_queues_in_order() -> None:
    fields = POINT.fields()
    names = list(fields)
    assert names == [*history.POINT_FIELDS, "q:{emails}:vip", "q:{emails}:bulk"]
    assert fields["q:{emails}:vip"] == "3 40 53 10600 2250000 1200 900"
    assert fields["q:{emails}:bulk"] == "0 0 - - - - -"
    assert history.HistoryPoint.decode(fields) == POINT


def test_queue_fields_name_the_queue_point_fields_in_order() -> None:
    assert tuple(f.name for f in dataclasses.fields(history.QueuePoint)) == history.QUEUE_FIELDS


def test_readers_ignore_fields_and_numbers_they_do_not_know() -> None:
    decision = {**ENTRY.fields(), "cap": "7", "lull": "x"}
    point = {**POINT.fields(), "forecast:{emails}:vip": "9", "new_total": "1",
             "q:{emails}:vip": "3 40 53 10600 2250000 1200 900 77 -"}
    assert history.DecisionEntry.decode(decision) == ENTRY
    assert history.HistoryPoint.decode(point) == POINT


def test_numbers_a_writer_did_not_know_yet_are_unknown() -> None:
    point = history.HistoryPoint.decode({**POINT.fields(), "q:{emails}:vip": "3 40"})
    assert point.queues["{emails}:vip"] == history.QueuePoint(backlog=3, arrived=40)


def as_reply(entries: list[dict[str, str]], *, flat: bool, raw: bool) -> list[Any]:
    def enc(s: str) -> Any:
        return s.encode() if raw else s
    out: list[Any] = []
    for i, fields in enumerate(entries):
        pairs = [(enc(k), enc(v)) for k, v in fields.items()]
        body: Any = [x for p in pairs for x in p] if flat else dict(pairs)
        out.append((enc(f"{1000 + i}-0"), body))
    return out


@pytest.mark.parametrize("flat, raw", [
    pytest.param(False, False, id="redis-py-decoded"),
    pytest.param(False, True, id="redis-py-bytes"),
    pytest.param(True, True, id="resp-flat-bytes"),
])
def test_xrange_replies_are_read_in_every_shape(flat: bool, raw: bool) -> None:
    assert history.decisions(as_reply([ENTRY.fields()] * 2, flat=flat, raw=raw)) == [
        ("1000-0", ENTRY), ("1001-0", ENTRY)]
    assert history.points(as_reply([POINT.fields()], flat=flat, raw=raw)) == [("1000-0", POINT)]


@pytest.mark.parametrize("change, problem", [
    pytest.param({"to": None}, "without field 'to'", id="missing"),
    pytest.param({"from": ""}, "field 'from' is empty", id="empty-required"),
    pytest.param({"backlog": "many"}, "field 'backlog' is 'many', not a whole number",
                 id="not-a-number"),
])
def test_a_broken_entry_names_its_field(change: dict[str, str | None], problem: str) -> None:
    fields: dict[str, str] = {**ENTRY.fields()}
    for name, value in change.items():
        if value is None:
            del fields[name]
        else:
            fields[name] = value
    with pytest.raises(ValueError, match=problem):
        history.DecisionEntry.decode(fields)


def test_a_broken_queue_number_names_the_queue() -> None:
    with pytest.raises(ValueError, match=re.escape("'q:{emails}:vip' is 'x'")):
        history.HistoryPoint.decode({**POINT.fields(), "q:{emails}:vip": "3 x"})
