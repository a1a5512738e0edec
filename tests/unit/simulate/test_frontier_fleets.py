"""`bench/scaling/frontier.py`'s fleets: a reactive fleet with no hold goes to zero on the first
poll that sees nothing to do; a warm one keeps one pod until the manifest's idleCooldownSeconds
after the last task, as the operator and keda-tuned do, and no more than one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from taskqueue.api.models import TaskQueue
from taskqueue.simulate.run import simulate
from taskqueue.simulate.trace import Arrival

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench" / "scaling"))

from frontier import Fleet

COOLDOWN = 30.0


def manifest() -> TaskQueue:
    return TaskQueue.model_validate({"spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "tasks"}],
        "worker": {"concurrency": 1},
        "scaling": {"maxReplicas": 10, "idleCooldownSeconds": COOLDOWN,
                    "targetWaitSeconds": {"tasks": 10.0}}}})


# three 4 s tasks at 10 s, then one at 300 s (so the run goes on past the cooldown)
TRACE = [Arrival(10.0, "tasks", 4.0)] * 3 + [Arrival(300.0, "tasks", 4.0)]


def after_the_burst(mode: str) -> list[tuple[float, int]]:
    """The fleet's replica counts from the first task's end to the next task."""
    result = simulate(manifest(), TRACE, Fleet(manifest(), pods=4, hold=0.0, mode=mode))
    return [(t, n) for t, n in result.scale_log if 15.0 <= t < 300.0]


@pytest.mark.parametrize("mode, counts", [
    pytest.param("reactive", [0], id="reactive-to-zero-at-once"),
    pytest.param("warm", [1, 0], id="warm-one-pod-through-the-cooldown"),
])
def test_what_stays_after_the_last_task(mode: str, counts: list[int]) -> None:
    assert [n for _, n in after_the_burst(mode)] == counts


def test_the_warm_pod_goes_a_cooldown_after_the_last_task() -> None:
    (_, _), (zero_at, _) = after_the_burst("warm")
    # the tasks end at 10 + 0.1 s write + 5 s start-up + 4 s; the last poll that sees one in
    # flight is within a poll of that, and the pod goes on the first poll a cooldown later
    poll, end = manifest().spec.scaling.pollIntervalSeconds, 19.1
    assert end - poll + COOLDOWN <= zero_at <= end + COOLDOWN + poll
