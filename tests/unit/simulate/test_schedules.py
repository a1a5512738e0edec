"""`taskqueue simulate` with spec.schedules: the slots' tasks join the trace, and because the
operator fires them ahead into the delayed zset, the simulated operator sees them as demand due
soon and has pods started when they fall due."""

from __future__ import annotations

import datetime
from typing import Any

from taskqueue.api import schedulespec
from taskqueue.api.models import TaskQueue
from taskqueue.simulate import trace
from taskqueue.simulate.run import Settings, simulate
from taskqueue.simulate.scalers import OperatorScaler

START = datetime.datetime(2026, 3, 29, tzinfo=datetime.UTC).timestamp()


def _tq(**schedule: Any) -> TaskQueue:
    return TaskQueue.model_validate({"spec": {
        "redis": {"url": "redis://r"}, "queues": [{"key": "tasks"}],
        "scaling": {"minReplicas": 0, "podStartupSeconds": 20, "idleCooldownSeconds": 30},
        "schedules": [{"name": "s", "queue": "tasks", **schedule}]}})


def test_the_slots_become_arrivals_at_slot_plus_jitter() -> None:
    tq = _tq(cron="0 * * * *", timeZone="Europe/Berlin", jitterSeconds=60)
    got = trace.scheduled(tq.spec.schedules, start=START, duration=6 * 3600, service=1.0)
    slots = list(schedulespec.slots(tq.spec.schedules[0], after=START, until=START + 6 * 3600))
    assert len(got) == len(slots) == 6 and all(a.scheduled for a in got)
    assert [a.at for a in got] == [schedulespec.due_ms(tq.spec.schedules[0], s) / 1000 - START
                                  for s in slots]
    assert trace.scheduled(_tq(cron="* * * * *", suspend=True).spec.schedules, start=START,
                           duration=600, service=1.0) == []


def test_fired_ahead_tasks_find_their_pods_started() -> None:
    tq = _tq(cron="*/10 * * * *")
    arrivals = trace.scheduled(tq.spec.schedules, start=START, duration=3600, service=1.0)
    unannounced = [trace.Arrival(a.at, a.queue, a.service) for a in arrivals]
    settings = Settings(startup=20.0)
    ahead = simulate(tq, arrivals, OperatorScaler(tq), settings)
    late = simulate(tq, unannounced, OperatorScaler(tq), settings)
    assert ahead.waits["tasks"][2] < 5.0 <= 20.0 <= late.waits["tasks"][2]
