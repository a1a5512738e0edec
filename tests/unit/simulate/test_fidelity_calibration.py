"""The fidelity harness calibrates the simulator on the run it compares with
(`tests.helpers.fidelity.Measured.delays`): the pods' start-up line against the pods created with
them, the API delay and the exit from that run's pod timestamps and decision log."""

from __future__ import annotations

from pathlib import Path

import pytest

from taskqueue.simulate import world
from tests.helpers.fidelity import (
    REDUCED,
    Delays,
    Measured,
    PodLife,
    Simulated,
    compare,
    percentile,
    phases_around,
    quantile_band,
    report,
    summarise,
)

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


@pytest.mark.parametrize(("n", "band"), [
    pytest.param(171, (157, 168), id="the-node-test-171-waits"),
    pytest.param(511, (477, 494), id="the-10-minute-run-511-waits"),
    pytest.param(20, (17, 20), id="few-waits-reach-the-largest"),
    pytest.param(1, (1, 1), id="one-wait"),
])
def test_the_p95s_band_holds_the_ranks_a_run_of_n_waits_could_show(
        n: int, band: tuple[int, int]) -> None:
    waits = [float(rank) for rank in range(n, 0, -1)]  # the wait of rank r is r seconds
    lo, hi = quantile_band(waits, 0.95)
    assert (lo, hi) == band
    assert lo <= percentile(waits, 0.95) <= hi


def test_no_waits_no_band() -> None:
    assert quantile_band([], 0.95) == (0.0, 0.0)


def tail_run() -> Measured:
    """171 waits: 150 of 1 s, then a steep tail, rank r (151-171) waiting 2^((r - 150) / 3) s:
    its p95 (rank 163) 20.2 s, the band from rank 157 (5.0 s) to rank 168 (64 s)."""
    waits = [1.0] * 150 + [2 ** ((r - 150) / 3) for r in range(151, 172)]
    m = run([])
    m.enqueued = {str(i): START for i in range(len(waits))}
    m.started = {str(i): START + w for i, w in enumerate(waits)}
    return m


@pytest.mark.parametrize(("simulated", "ok", "band_only"), [
    pytest.param(21.0, True, False, id="within-15-percent"),
    pytest.param(10.0, True, True, id="outside-15-percent-inside-the-band"),
    pytest.param(4.0, False, False, id="below-the-band"),
    pytest.param(70.0, False, False, id="above-the-band"),
])
def test_a_simulated_p95_passes_within_the_tolerance_or_the_real_runs_band(
        simulated: float, ok: bool, band_only: bool) -> None:
    m = tail_run()
    assert m.p95() == pytest.approx(2 ** (13 / 3))
    sim = Simulated(worker_seconds=0.0, p95=simulated, max_replicas=0, unserved=0, timeline=[])
    [_, p95, _] = compare(m, sim)
    assert p95.band == pytest.approx((2 ** (7 / 3), 2 ** 6))
    assert (p95.ok, p95.in_band_only) == (ok, band_only)
    assert ("band 5.04-64.00" in report(m, sim, compare(m, sim))) == band_only


def test_the_phases_around_the_real_runs_centre_on_it_and_stay_inside_the_interval() -> None:
    phases = phases_around(1.8, interval=2.0)
    assert len(phases) == 11 and phases[5] == pytest.approx(1.8)
    assert phases[:2] == pytest.approx([1.3, 1.4])
    assert phases[-3:] == pytest.approx([0.1, 0.2, 0.3])  # 2.1, 2.2, 2.3 wrap round
    assert all(0.0 <= p < 2.0 for p in phases)


def sim(p95: float, *, worker_seconds: float = 100.0, max_replicas: int = 8,
        unserved: int = 0) -> Simulated:
    return Simulated(worker_seconds=worker_seconds, p95=p95, max_replicas=max_replicas,
                     unserved=unserved, timeline=[(0.0, max_replicas)])


def test_the_simulated_figures_are_the_median_of_the_runs() -> None:
    # one run's p95 far off (a poll that took another branch) does not move the median
    runs = [sim(3.1, worker_seconds=700.0), sim(3.5, worker_seconds=690.0, max_replicas=7),
            sim(9.0, worker_seconds=720.0), sim(3.4, worker_seconds=705.0, max_replicas=7),
            sim(3.6, worker_seconds=710.0)]
    s = summarise(runs)
    assert (s.p95, s.worker_seconds, s.max_replicas) == (3.5, 705.0, 8)
    assert (s.runs, s.p95_range, s.unserved) == (5, (3.1, 9.0), 0)
    assert s.timeline == runs[2].timeline


def test_a_task_one_simulated_run_left_unserved_is_reported() -> None:
    assert summarise([sim(3.0), sim(3.0, unserved=2), sim(3.0)]).unserved == 2


def test_no_runs_no_summary() -> None:
    with pytest.raises(ValueError, match="no simulated runs"):
        summarise([])


def test_a_measurement_printed_as_json_replays_with_its_trace_and_start_up(
        tmp_path: Path) -> None:
    m = run([pod(0, 10.0, 1.0, deleting=100.0, gone=101.5)], [(9.95, 0, 1)])
    m.note_setting(REDUCED, pod_startup=5.0)
    (tmp_path / "run.json").write_text(m.to_json())
    again = Measured.load_json(tmp_path / "run.json")
    assert again == m
    assert again.setting() == (REDUCED, 5.0)  # what bench/scaling/fidelity.py compare replays
