"""Slots held past a burst's deadline (`waitmodel.size_for_wait`'s burst term).

A slot busy with a task that runs past the oldest task's deadline starts none of a burst and
stays busy: the new slots come on top of it. Pure; no Redis."""

from __future__ import annotations

import pytest

from taskqueue.scaling.waitmodel import (
    NO_STANDING,
    QueueLoad,
    Standing,
    WaitSizing,
    size_for_wait,
)


def sized(*, rate: float, queued: int, target: float, service: float, age: float = 0.0,
          cv2: float = 1.0, startup: float,
          standing: Standing = NO_STANDING) -> WaitSizing:
    queue = QueueLoad("q", rate, queued, target, service=service, oldest_age=age, cv2=cv2)
    return size_for_wait([queue], service=service, horizon=max(startup, 2.0), startup=startup,
                         standing=standing)


@pytest.mark.parametrize(("service", "slots"), [
    # 2 queued on 3 slots busy with 20 s tasks: none frees by the deadline (5 - 1 s start-up),
    # so the queued ones get new slots on top of the 3
    pytest.param(20.0, 5, id="long-tasks-hold-their-slots"),
    # the same with 2 s tasks: the busy slots free in time and start them
    pytest.param(2.0, 2, id="short-tasks-free-in-time"),
])
def test_slots_busy_past_the_deadline_start_none_of_the_burst(service: float,
                                                              slots: int) -> None:
    got = sized(rate=0.5 / service, queued=2, target=5.0, service=service, startup=1.0,
                standing=Standing(busy=3))
    assert got.slots == slots
