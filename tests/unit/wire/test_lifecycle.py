"""What status.lua's reply means (`lifecycle.read_status`), progress reports, and the status
lines of `taskqueue status`. Pure."""

from __future__ import annotations

import json

import pytest

from taskqueue.cli.status import render
from taskqueue.wire import lifecycle

P = "q:processing:"
NOW_MS = "2000000"


def reply(index: dict[str, str] | None = None, *, cancel: str = "", done: int = 0,
          lease: str = "", deadline: str = "", progress: str = "") -> list[object]:
    flat = [x for kv in (index or {}).items() for x in kv]
    return [flat, cancel, done, lease, deadline, progress, NOW_MS]


@pytest.mark.parametrize(
    ("name", "raw", "state", "worker", "alive"),
    [
        ("nothing known", reply(), "unknown", "", None),
        ("indexed queued", reply({"state": "queued", "queue": "q", "at": "1000"}), "queued", "",
         None),
        ("indexed running, worker alive",
         reply({"state": "running", "processing": P + "w1", "attempt": "2"},
               deadline="3000000"), "running", "w1", True),
        ("indexed running, heartbeat expired",
         reply({"state": "running", "processing": P + "w1"}, deadline="1000"), "running", "w1",
         False),
        ("untracked, idempotency lease", reply(lease="w2", deadline="3000000"), "running", "w2",
         True),
        ("untracked, a slot's lease", reply(lease="pod-a#3", deadline="3000000"), "running",
         "pod-a", True),
        ("a worker id with a # of its own", reply(lease="a#b"), "running", "a#b", False),
        ("untracked, done marker", reply(done=1), "done", "", None),
        ("cancel recorded, still queued", reply({"state": "queued"}, cancel="9"), "cancelling",
         "", None),
        ("cancel recorded, untracked", reply(cancel="9"), "cancelling", "", None),
        ("cancelled", reply({"state": "cancelled"}), "cancelled", "", None),
        ("done is done even with a stale cancel", reply({"state": "done"}, cancel="9"), "done",
         "", None),
    ],
)
def test_read_status(name: str, raw: list[object], state: str, worker: str,
                     alive: bool | None) -> None:
    s = lifecycle.read_status("t", raw, processing_prefix=P)
    assert (s.state, s.worker, s.worker_alive) == (state, worker, alive), name


@pytest.mark.parametrize(("given", "kept"), [
    (0.5, 0.5), (-1, 0.0), (7, 1.0), (None, None), (float("nan"), None), ("0.25", 0.25),
    ("half", None), (True, None),
])
def test_progress_fraction_is_clamped_or_dropped(given: object, kept: float | None) -> None:
    assert lifecycle.progress_fraction(given) == kept  # type: ignore[arg-type]


def test_progress_round_trips_and_bad_json_is_none() -> None:
    p = lifecycle.Progress(fraction=0.5, message="half ✓", at=12.5)
    assert lifecycle.Progress.decode(p.encode()) == p
    assert lifecycle.Progress.decode("{") is None and lifecycle.Progress.decode("[]") is None


def test_render_running_with_progress() -> None:
    s = lifecycle.TaskStatus(id="t", state="running", queue="q", since=90.0, worker="w1",
                             worker_alive=True, attempt=2, tracked=True,
                             progress=lifecycle.Progress(fraction=0.25, message="a quarter",
                                                         at=99.0))
    assert render(s, now=100.0).splitlines() == [
        "task: t", "state: running", "queue: q", "since: 10s ago", "worker: w1", "attempt: 2",
        "progress: 25% a quarter (1s ago)"]


def test_a_dead_task_shows_the_error_of_its_record() -> None:
    raw = reply({"state": "dead", "at": "90000", "error": "ValueError: bad input"})
    s = lifecycle.read_status("t", raw, processing_prefix=P)
    assert (s.state, s.error) == ("dead", "ValueError: bad input")
    assert render(s, now=100.0).splitlines()[-2:] == [
        "error: ValueError: bad input", "(the dead-letter record is in `taskqueue dlq list`)"]
    record = {"queue": "q2", "payload": "x" * 300, "attempts": 3, "error": "ValueError: bad input",
              "failed_at": 86400.0, "id": "t"}
    full = lifecycle.read_status("t", reply({"state": "dead", "at": "90000", "queue": "q",
                                             "attempt": "1", "error": record["error"],
                                             "record": json.dumps(record)}),
                                 processing_prefix=P)
    assert (full.record, full.queue, full.attempt) == (record, "q2", 3)
    assert render(full, now=86500.0).splitlines()[-4:] == [
        "error: ValueError: bad input", "attempts: 3",
        "failed at: 1970-01-02T00:00:00Z (1m40s ago)", f'payload: "{"x" * 200} ..."']
    unreadable = lifecycle.read_status("t", reply({"state": "dead", "record": "{"}),
                                       processing_prefix=P)
    assert unreadable.record is None and unreadable.state == "dead"
    requeued = lifecycle.read_status("t", reply({"state": "queued", "error": "old"}),
                                     processing_prefix=P)
    assert requeued.error == ""
