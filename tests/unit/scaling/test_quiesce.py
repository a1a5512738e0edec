"""Scale-in victims and safety (pure): who leaves, when, and at which deletion cost."""

from __future__ import annotations

import pytest

from taskqueue.controller.kube import PodState
from taskqueue.scaling.quiesce import (
    RUNNING_READY,
    VICTIM_DELETION_COST,
    PodView,
    choose_victims,
    deletion_costs,
    drained,
    plan,
    removable,
    replicas_after,
    replicaset_rank,
)

PODS = [
    PodView("old-busy", 3, created=100.0),
    PodView("old-idle", 0, created=110.0),
    PodView("new-idle", 0, created=200.0),
    PodView("new-one", 1, created=190.0),
]


@pytest.mark.parametrize("remove, quiesced, expected", [
    pytest.param(0, (), (), id="none"),
    pytest.param(1, (), ("new-idle",), id="idle-newest-first"),
    pytest.param(2, (), ("new-idle", "old-idle"), id="all-idle-before-busy"),
    pytest.param(3, (), ("new-idle", "old-idle", "new-one"), id="then-fewest-in-flight"),
    pytest.param(1, ("old-idle",), ("old-idle",), id="already-quiesced-wins-a-tie"),
    pytest.param(9, (), ("new-idle", "old-idle", "new-one", "old-busy"), id="more-than-pods"),
])
def test_choose_victims(remove: int, quiesced: tuple[str, ...],
                        expected: tuple[str, ...]) -> None:
    assert choose_victims(PODS, remove=remove, quiesced=quiesced) == expected


@pytest.mark.parametrize("target, quiesced, victims, release", [
    pytest.param(4, (), (), (), id="no-scale-in"),
    pytest.param(4, ("new-one", "gone-pod"), (), ("gone-pod", "new-one"),
                 id="victims-no-longer-needed-are-released"),
    pytest.param(2, ("new-one",), ("new-idle", "old-idle"), ("new-one",),
                 id="an-idle-pod-replaces-a-busy-victim"),
    pytest.param(1, ("new-one",), ("new-idle", "old-idle", "new-one"), (), id="kept-quiesced"),
])
def test_plan(target: int, quiesced: tuple[str, ...], victims: tuple[str, ...],
              release: tuple[str, ...]) -> None:
    scale_in = plan(PODS, target=target, quiesced=quiesced)
    assert scale_in.victims == victims
    assert scale_in.release == release


NOT_READY = replicaset_rank(scheduled=True, phase="Running", ready=False)
PENDING = replicaset_rank(scheduled=True, phase="Pending", ready=False)


@pytest.mark.parametrize("first, second", [
    pytest.param((False, "Running", True),
                 (True, "Pending", False), id="unscheduled-first"),
    pytest.param((True, "Pending", False),
                 (True, "Unknown", False), id="pending-before-unknown"),
    pytest.param((True, "Unknown", True),
                 (True, "Running", False), id="unknown-before-running"),
    pytest.param((True, "", False),
                 (True, "Unknown", False), id="no-phase-as-pending"),
    pytest.param((True, "Running", False),
                 (True, "Running", True), id="not-ready-before-ready"),
])
def test_replicaset_rank_follows_the_replicaset_deletion_order(
        first: tuple[bool, str, bool], second: tuple[bool, str, bool]) -> None:
    # kubernetes pkg/controller ActivePodsWithRanks.Less, the rules before pod-deletion-cost
    (s1, p1, r1), (s2, p2, r2) = first, second
    assert (replicaset_rank(scheduled=s1, phase=p1, ready=r1)
            < replicaset_rank(scheduled=s2, phase=p2, ready=r2) <= RUNNING_READY)


BUSY_NOT_READY = [
    PodView("ready-idle", 0, created=100.0),
    PodView("ready-busy", 2, created=90.0),
    PodView("probe-failing-busy", 1, created=80.0, rank=NOT_READY),
]


@pytest.mark.parametrize("pods, remove, expected", [
    pytest.param(BUSY_NOT_READY, 1, ("probe-failing-busy",), id="not-ready-busy-before-idle"),
    pytest.param(BUSY_NOT_READY, 2, ("probe-failing-busy", "ready-idle"), id="then-by-in-flight"),
    pytest.param([*PODS, PodView("starting", 0, created=50.0, rank=PENDING)], 2,
                 ("starting", "new-idle"), id="an-older-starting-pod-before-a-newer-idle-one"),
    pytest.param([PodView("pending", 0, 1.0, rank=PENDING), PodView("not-ready", 0, 2.0,
                                                                   rank=NOT_READY)],
                 1, ("pending",), id="pending-before-not-ready"),
])
def test_victims_are_the_pods_the_replicaset_deletes_first(
        pods: list[PodView], remove: int, expected: tuple[str, ...]) -> None:
    assert choose_victims(pods, remove=remove) == expected


@pytest.mark.parametrize("pods, drained_victims, expected", [
    pytest.param(PODS, ("new-idle", "old-idle"), 2, id="all-ready-every-drained-victim"),
    pytest.param(PODS, (), 0, id="none-drained"),
    pytest.param(BUSY_NOT_READY, ("ready-idle",), 0,
                 id="a-busy-not-ready-pod-would-go-before-the-drained-victim"),
    pytest.param(BUSY_NOT_READY, ("probe-failing-busy", "ready-idle"), 2,
                 id="once-it-drained-both-go"),
    pytest.param([PodView("starting", 0, 50.0, rank=PENDING), *PODS], ("new-idle",), 0,
                 id="an-idle-starting-non-victim-would-go-first"),
    pytest.param([PodView("starting", 0, 50.0, rank=PENDING), *PODS], ("starting", "new-idle"), 2,
                 id="starting-victim-then-ready-victim"),
])
def test_removable_counts_only_drained_victims_the_replicaset_ranks_first(
        pods: list[PodView], drained_victims: tuple[str, ...], expected: int) -> None:
    assert removable(pods, drained_victims) == expected


def test_only_victims_empty_after_quiescing_are_drained() -> None:
    assert drained(("a", "b", "c"), {"a": 0, "b": 2}) == ("a", "c")


@pytest.mark.parametrize("current, target, pods, removable, expected", [
    pytest.param(4, 1, 4, 3, 1, id="all-drained"),
    pytest.param(4, 1, 4, 1, 3, id="one-drained-one-leaves"),
    pytest.param(4, 1, 4, 0, 4, id="none-drained-hold"),
    pytest.param(5, 3, 3, 0, 3, id="missing-pods-removed-freely"),
    pytest.param(4, 2, 5, 2, 3, id="extra-pod-counted"),
])
def test_replicas_after_never_removes_a_busy_pod(current: int, target: int, pods: int,
                                                 removable: int, expected: int) -> None:
    assert replicas_after(current=current, target=target, pods=pods,
                          removable=removable) == expected


@pytest.mark.parametrize("held, victims, expected", [
    pytest.param({"a": 2, "c": 0}, ("c",), {"a": "2", "b": "0", "c": str(VICTIM_DELETION_COST)},
                 id="drained-victim-lowest"),
    pytest.param({"a": 3, "c": 1, "gone": 9}, (), {"a": "3", "b": "0", "c": "1"},
                 id="no-victim-in-flight-count"),
])
def test_deletion_costs_put_drained_victims_first(held: dict[str, int], victims: tuple[str, ...],
                                                  expected: dict[str, str]) -> None:
    costs = deletion_costs(["a", "b", "c"], held, victims=victims)
    assert costs == expected


@pytest.mark.parametrize("phase, deleting, active", [
    pytest.param("Running", False, True, id="running"),
    pytest.param("", False, True, id="no-status-yet"),
    pytest.param("Pending", False, True, id="pending"),
    pytest.param("Running", True, False, id="being-deleted"),
    pytest.param("Failed", False, False, id="evicted-pods-linger-as-failed"),
    pytest.param("Succeeded", False, False, id="succeeded"),
])
def test_the_scale_in_counts_the_pods_the_replicaset_counts(phase: str, deleting: bool,
                                                            active: bool) -> None:
    assert PodState("p", None, deleting, phase=phase).active is active
