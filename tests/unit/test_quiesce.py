"""Scale-in victims and safety (pure): who leaves, when, and at which deletion cost."""

from __future__ import annotations

import pytest

from taskqueue.quiesce import (
    VICTIM_DELETION_COST,
    PodView,
    choose_victims,
    deletion_costs,
    drained,
    plan,
    replicas_after,
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
