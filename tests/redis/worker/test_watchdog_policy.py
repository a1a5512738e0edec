"""When the watchdog ends a worker (`watchdog.Watch`, pure): a loop held past its limit, a drain
past its grace; and what does not count (the worker's own fetch, a process that did not run)."""

from __future__ import annotations

import pytest

from taskqueue.worker import watchdog

TICK = 0.5
STALL_LIMIT = 2.0  # a task timeout of 1 s + the margin
DRAIN_LIMIT = 5.0


def first_verdict(ticks: list[tuple[float, str]], *, stall_limit: float | None = STALL_LIMIT,
                  ) -> tuple[float, str] | None:
    """Run the ticks (time, what was seen: "turning", "held", "fetching", "stopping" or
    "held+stopping"); the first tick whose verdict is not "ok", and that verdict."""
    watch = watchdog.Watch(tick=TICK, stall_limit=stall_limit, drain_limit=DRAIN_LIMIT)
    for now, seen in ticks:
        verdict = watch.check(now, loop_held="held" in seen, in_fetch=seen == "fetching",
                              stopping="stopping" in seen)
        if verdict != "ok":
            return now, verdict
    return None


def every_tick(start: float, end: float, seen: str) -> list[tuple[float, str]]:
    n = round((end - start) / TICK)
    return [(start + i * TICK, seen) for i in range(n + 1)]


@pytest.mark.parametrize(
    ("ticks", "stall_limit", "verdict"),
    [
        pytest.param(every_tick(0, 30, "turning"), STALL_LIMIT, None, id="a-turning-loop"),
        # the no-op posted at 0.5 s has not run since: held from 0.5 s, past 2 s at 3 s
        pytest.param(every_tick(0, 0.5, "turning") + every_tick(1, 30, "held"), STALL_LIMIT,
                     (3.0, "stalled"), id="a-held-loop-stalls-past-the-limit"),
        pytest.param(every_tick(0, 0.5, "turning") + every_tick(1, 30, "held"), None, None,
                     id="no-task-timeout-no-limit"),
        pytest.param(every_tick(0, 0.5, "turning") + every_tick(1, 30, "fetching"),
                     STALL_LIMIT, None, id="the-workers-own-fetch-does-not-count"),
        # the fetch ends at 10 s and a handler holds the loop from then on
        pytest.param(every_tick(0, 9.5, "fetching") + every_tick(10, 30, "held"), STALL_LIMIT,
                     (12.0, "stalled"), id="the-clock-starts-after-the-fetch"),
        # the process did not run from 0.5 s to 10 s (SIGSTOP): the lost time does not count
        pytest.param([(0, "turning"), (0.5, "turning"), (10.0, "held"), (10.5, "turning")],
                     STALL_LIMIT, None, id="a-late-tick-is-not-a-stall"),
        pytest.param([(0, "turning"), (0.5, "turning"), (10.0, "held"),
                      *every_tick(10.5, 30, "held")],
                     STALL_LIMIT, (12.0, "stalled"), id="held-after-a-late-tick-still-stalls"),
        pytest.param(every_tick(0, 0.5, "turning") + every_tick(1, 30, "stopping"),
                     STALL_LIMIT, (6.5, "overrun"), id="a-drain-past-its-limit"),
        pytest.param(every_tick(0, 0.5, "turning") + every_tick(1, 30, "held+stopping"),
                     None, (6.5, "overrun"), id="a-held-loop-without-timeout-in-a-drain"),
        pytest.param([*every_tick(0, 0.5, "turning"), (1, "stopping"), (30, "stopping"),
                      (30.5, "stopping")],
                     STALL_LIMIT, None, id="a-drain-whose-process-did-not-run-has-its-time"),
    ],
)
def test_when_the_watchdog_ends_the_worker(ticks: list[tuple[float, str]],
                                           stall_limit: float | None,
                                           verdict: tuple[float, str] | None) -> None:
    assert first_verdict(ticks, stall_limit=stall_limit) == verdict
