"""The simulated cluster's delays measured on the real node (`taskqueue.simulate.world`): pods
created together start more slowly on one small node, a drained pod told to stop is billed until
it exits (and has deregistered), and the operator's first poll can be placed in the interval."""

from __future__ import annotations

import pytest

from taskqueue.simulate.run import Settings, simulate
from taskqueue.simulate.scalers import OperatorScaler
from taskqueue.simulate.trace import Arrival
from taskqueue.simulate.world import World
from tests.unit.simulate.test_simulate import manifest


def test_pods_created_together_start_later_by_the_per_pod_delay() -> None:
    world = World([], queues=["q"], concurrency=1, startup=1.0, grace=5.0,
                  startup_per_pod=0.5)
    world.scale(4, 0.0)
    assert [p.ready_at for p in world.pods] == pytest.approx([2.5] * 4)  # 1 + 3 x 0.5
    world.advance(10.0)
    world.scale(5, 10.0)  # alone: the others are up
    assert world.pods[-1].ready_at == pytest.approx(11.0)


def test_a_pod_starting_counts_against_a_pod_created_after_it() -> None:
    world = World([], queues=["q"], concurrency=1, startup=2.0, grace=5.0,
                  startup_per_pod=1.0)
    world.scale(1, 0.0)  # ready at 2
    world.scale(2, 1.0)  # the first still starting: 2 + 1
    assert [p.ready_at for p in world.pods] == pytest.approx([2.0, 4.0])


def test_a_drained_pod_is_billed_until_it_exits_and_is_no_worker_meanwhile() -> None:
    world = World([], queues=["q"], concurrency=1, startup=0.0, grace=5.0, exit_delay=1.3)
    world.scale(1, 0.0)
    world.advance(0.0)
    world.scale(0, 10.0)
    ticks = [10.0 + n * 0.1 for n in range(31)]
    seen = []
    for t in ticks:
        world.advance(t)
        seen.append((t, len(world.pods), len(world.observe(t).workers)))
    assert [n for t, n, _ in seen if t < 11.3 - 1e-9] == [1] * 13
    assert [n for t, n, _ in seen if t > 11.4] == [0] * len([t for t, _, _ in seen if t > 11.4])
    assert all(w == 0 for _, _, w in seen)  # deregistered at SIGTERM
    assert world.worker_seconds == pytest.approx(11.3, abs=0.11)


def test_the_first_poll_can_land_anywhere_in_the_interval() -> None:
    tq = manifest(1, pollIntervalSeconds=2)
    batch = [Arrival(20.0, "tasks", 1.0)] * 4
    settings = Settings(startup=1.0, tail=60.0)
    early = simulate(tq, batch, OperatorScaler(tq), settings)
    late = simulate(tq, batch, OperatorScaler(tq, first_poll=1.9), settings)
    # polled at 20 (+ the API delay), or at 21.9 (polls at 1.9, 3.9, ...); within a tick
    assert early.scale_log[0][0] == pytest.approx(20.1, abs=0.15)
    assert late.scale_log[0][0] == pytest.approx(22.0, abs=0.15)
    assert late.waits["tasks"][0] - early.waits["tasks"][0] == pytest.approx(1.9, abs=0.15)


def test_a_simulated_worker_reports_when_its_running_tasks_started() -> None:
    # as heartbeat.lua keeps them for observe.lua: the operator counts held slots from them
    trace = [Arrival(1.0, "q", 600.0), Arrival(2.0, "q", 0.5), Arrival(3.0, "q", 30.0)]
    world = World(trace, queues=["q"], concurrency=2, startup=0.0, grace=5.0)
    world.scale(1, 0.0)
    world.advance(0.0)
    world.advance(3.1)
    assert [w.started_ms for w in world.observe(3.1).workers] == [(1000, 3000)]
    world.advance(40.0)
    assert [w.started_ms for w in world.observe(40.0).workers] == [(1000,)]
