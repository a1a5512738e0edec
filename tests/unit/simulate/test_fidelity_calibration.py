"""The fidelity harness calibrates the simulator on the run it compares with
(`tests.helpers.fidelity.Measured.delays`): the pods' start-up line against the pods created with
them, the API delay and the exit from that run's pod timestamps and decision log."""

from __future__ import annotations

import pytest

from taskqueue.simulate import world
from tests.helpers.fidelity import Delays, Measured, PodLife

START = 1_000.0


def run(pods: list[PodLife], decisions: list[tuple[float, int, int]] | None = None) -> Measured:
    return Measured(start=START, end=START + 600, enqueued={}, started={}, pods=pods,
                    replicas=[], decisions=decisions or [], push_lag_max=0.0, load=(0.0, 0.0))


def pod(n: int, added: float, startup: float, *, deleting: float | None = None,
        gone: float | None = None) -> PodLife:
    return PodLife(f"p{n}", START + added, registered=START + added + startup,
                   deleting=None if deleting is None else START + deleting,
                   gone=None if gone is None else START + gone)


def test_the_start_up_line_the_api_delay_and_the_exit_of_the_run() -> None:
    # one pod alone up in 1.0 s, then three created together up in 1.0 + 2 x 0.5 = 2.0 s
    pods = [pod(0, 10.0, 1.0, deleting=100.0, gone=101.5),
            *(pod(n, 50.0 + 0.1 * n, 2.0, deleting=200.0, gone=200.5 + 0.5 * n) for n in (1, 2, 3))]
    # the decisions at 9.95 s (one pod) and 49.9 s (three): the pods 0.05 s and 0.2 s later
    delays = run(pods, [(9.95, 0, 1), (49.9, 1, 4), (120.0, 4, 0)]).delays()
    assert (delays.startup, delays.per_pod) == pytest.approx((1.0, 0.5))
    assert delays.api == pytest.approx(0.05)  # the median (nearest rank) of 0.05 and 0.2
    assert delays.exit == pytest.approx(1.5)  # of 1.5, 1, 1.5, 2
    assert delays.flags() == ["--startup", "1.000", "--startup-per-pod", "0.500",
                              "--api-delay", "0.050", "--exit-delay", "1.500"]


def test_a_run_that_could_not_measure_a_delay_keeps_the_default() -> None:
    assert run([]).delays() == Delays()
    # pods that started together only: no slope to fit, their mean start-up alone
    together = run([pod(n, 5.0, 1.5 + 0.1 * n) for n in range(3)]).delays()
    assert (together.startup, together.per_pod) == pytest.approx((1.6, 0.0))
    assert (together.api, together.exit) == (world.API_DELAY_SECONDS, world.EXIT_SECONDS)


def test_a_start_up_that_falls_with_more_pods_is_not_a_negative_delay() -> None:
    pods = [pod(0, 10.0, 3.0), pod(1, 50.0, 1.0), pod(2, 50.2, 1.0)]
    delays = run(pods).delays()
    assert delays.per_pod == 0.0 and delays.startup > 0
