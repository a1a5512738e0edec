"""The pure part of firing schedules (`controller.schedules`): which slots a poll sends, what it
counts as missed, the status and the Events."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import manifest, schedulespec
from taskqueue.controller import schedules
from taskqueue.wire import keys

T0 = 1_800_000_000.0


def _spec(**schedule: Any) -> Any:
    body = {"name": "tick", "cron": "* * * * * *", "queue": "q", **schedule}
    spec = {"redis": {"url": "redis://r"}, "queues": [{"key": "p"}, {"key": "q"}],
            "schedules": [body]}
    return manifest.parse({"kind": "TaskQueue", "spec": spec}).spec


def _plan(seen: float | None, now: float, **schedule: Any) -> schedules.Plan:
    spec = _spec(**schedule)
    return schedules.plan(spec, keys.KeySchema.from_spec(spec),
                          seen={"tick": None if seen is None else int(seen * 1000)},
                          now=now, horizon=2.0)[0]


def _slots(p: schedules.Plan) -> list[float]:
    return [s.slot_ms / 1000 - T0 for s in p.slots]


@pytest.mark.parametrize(("scenario", "seen", "now", "schedule", "slots", "missed", "through"), [
    ("first poll: from now to the horizon", None, T0, {}, [1, 2], 0, T0 + 2),
    ("steady: the slots after the last accounted", T0 + 2, T0 + 1, {}, [3], 0, T0 + 3),
    ("overlap Skip fires only due slots", T0, T0 + 2, {"overlap": "Skip"}, [1, 2], 0, T0 + 2),
    ("downtime within catchUpSeconds", T0, T0 + 60, {"catchUpSeconds": 300},
     list(range(1, 63)), 0, T0 + 62),
    ("downtime beyond catchUpSeconds", T0, T0 + 60, {"catchUpSeconds": 10},
     list(range(50, 63)), 49, T0 + 62),
    ("catchUpSeconds 0: only the due slot and the horizon", T0, T0 + 60,
     {"catchUpSeconds": 0}, [60, 61, 62], 59, T0 + 62),
    ("suspended: nothing, up to now", T0, T0 + 60, {"suspend": True}, [], 0, T0 + 60),
])
def test_the_slots_of_a_poll(scenario: str, seen: float | None, now: float,
                             schedule: dict[str, Any], slots: list[float], missed: int,
                             through: float) -> None:
    p = _plan(seen, now, **schedule)
    assert (_slots(p), p.missed, p.through_ms) == (slots, missed, int(through * 1000)), scenario


def test_a_slot_carries_its_deterministic_task() -> None:
    p = _plan(None, T0, payload='{"report": 1}', id="nightly", jitterSeconds=5)
    s = p.slots[0]
    task = keys.unwrap(s.element)
    assert s.task_id == task.id == "nightly:" + schedulespec.slot_text(T0 + 1)
    assert (task.payload, task.attempts, task.enqueued_at) == ('{"report": 1}', 0, T0 + 1)
    assert s.queue_index == 2 and T0 + 1 <= s.due_ms / 1000 < T0 + 6
    assert _plan(None, T0, payload='{"report": 1}', id="nightly", jitterSeconds=5).slots == p.slots


def test_a_long_gap_is_counted_over_several_polls() -> None:
    p = _plan(T0, T0 + 200_000, catchUpSeconds=0)
    assert p.missed == schedules.MAX_MISSED_PER_CALL and p.slots == ()
    assert p.through_ms == int((T0 + schedules.MAX_MISSED_PER_CALL) * 1000)


def test_status_and_events() -> None:
    spec = _spec(overlap="Skip")
    fired = schedules.Fired("tick", False, int(T0 * 1000), int(T0 * 1000), "tick:x", 3, 2,
                            "FS", missed_now=3)
    status = schedules.status(spec, {"tick": fired}, now=T0)
    assert status == {"schedules": {"tick": {
        "lastSlotTime": schedulespec.slot_text(T0), "lastTaskId": "tick:x",
        "nextSlotTime": schedulespec.slot_text(T0 + 1), "missed": 3, "skipped": 2,
        "suspended": False}}, "nextScheduleTime": schedulespec.slot_text(T0 + 1)}
    assert [n.reason for n in schedules.notices(spec, [fired])] == [
        "ScheduleSkipped", "ScheduleMissed"]
    stale = schedules.Fired("tick", True, None, None, None, 0, 0, "")
    assert schedules.notices(spec, [stale]) == []
    assert schedules.status(_spec(suspend=True), {}, now=T0)["nextScheduleTime"] is None
