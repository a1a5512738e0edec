"""A poll's scale-in, decided before any I/O and settled from Redis's reply
(`quiesce.plan_scale_in`, `Plan.settle`), and the poll's outcome (`policy.Outcome`): pure tables.
The I/O that carries a plan out is `controller.act.Actor.scale_in`
(tests/cluster/operator/test_quiesce.py)."""

from __future__ import annotations

import pytest

from taskqueue.scaling import policy, quiesce
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.quiesce import Plan, PodView, Settled

NOW = 1_000_000.0
STARTING = quiesce.replicaset_rank(scheduled=True, phase="Pending", ready=False)


def obs(held: dict[str, int], quiesced: frozenset[str] = frozenset()) -> QueueObservation:
    workers = tuple(WorkerObservation(w, int((NOW + 30) * 1000), n) for w, n in held.items())
    return QueueObservation(at=NOW, backlog={"q": 0}, workers=workers, quiesced=quiesced)


def pods(held: dict[str, int], *, starting: tuple[str, ...] = ()) -> tuple[PodView, ...]:
    return tuple(PodView(name, n, created=NOW - i,
                         rank=STARTING if name in starting else quiesce.RUNNING_READY)
                 for i, (name, n) in enumerate(held.items()))


THREE = {"a": 2, "b": 1, "c": 0}


@pytest.mark.parametrize("target, current, observation, listed, expected", [
    pytest.param(3, 3, obs(THREE), (), Plan(3, 3, settled=Settled(quiesced=frozenset())),
                 id="nothing-to-do-no-io"),
    pytest.param(4, 3, obs(THREE, frozenset({"c"})), (),
                 Plan(3, 4, frozenset({"c"}), release=("c",), settled=Settled(
                     4, None, "released 1 quiesced pod(s)", frozenset())),
                 id="more-again-releases-the-quiesced"),
    pytest.param(1, 3, None, (), Plan(3, 1, settled=Settled(
        3, quiesce.SCALE_IN_DEFERRED, "scale-in deferred: Redis cannot be read")),
                 id="redis-unreadable-holds"),
    pytest.param(5, 3, None, (), Plan(3, 5, settled=quiesce.UNCHANGED),
                 id="redis-unreadable-scale-up-goes-on"),
    pytest.param(2, 3, obs({**THREE, "host-1": 1}), pods(THREE), Plan(
        3, 2, settled=Settled(3, quiesce.WORKERS_NOT_PODS, "1 busy worker(s) are not pod names: "
                              "no quiesce, not below 3 busy workers", frozenset())),
                 id="busy-workers-that-are-not-pods"),
    pytest.param(1, 3, obs(THREE, frozenset({"b"})), pods(THREE),
                 Plan(3, 1, frozenset({"b"}), pods(THREE), ("c", "b"), ()),
                 id="victims-fewest-in-flight-already-quiesced-kept"),
    pytest.param(2, 3, obs(THREE, frozenset({"b"})), pods(THREE),
                 Plan(3, 2, frozenset({"b"}), pods(THREE), ("c",), ("b",)),
                 id="a-victim-no-longer-needed-is-released"),
])
def test_the_plan_before_any_io(target: int, current: int, observation: QueueObservation | None,
                                listed: tuple[PodView, ...], expected: Plan) -> None:
    assert quiesce.needs_pods(target=target, current=current, observation=observation) is bool(
        listed)
    assert quiesce.plan_scale_in(target=target, current=current, observation=observation,
                                 pods=listed) == expected


@pytest.mark.parametrize("plan, after, annotated, expected", [
    pytest.param(Plan(3, 1, pods=pods(THREE), quiesce=("c", "b")), {"c": 0, "b": 0}, True,
                 Settled(1, None, "quiesced 2 pod(s), 2 drained", frozenset({"b", "c"})),
                 id="all-drained-all-leave"),
    pytest.param(Plan(3, 1, pods=pods(THREE), quiesce=("c", "b")), {"c": 0, "b": 1}, True,
                 Settled(2, quiesce.DRAINING, "quiesced 2 pod(s), 1 drained, 1 still finishing "
                         "their tasks", frozenset({"b", "c"})),
                 id="a-busy-victim-waits"),
    pytest.param(Plan(3, 1, pods=pods(THREE), quiesce=("c", "b")), {"c": 0, "b": 0}, False,
                 Settled(3, quiesce.SCALE_IN_DEFERRED, "quiesced 2 pod(s), 2 drained, a "
                         "pod-deletion-cost could not be written: nothing removed this poll",
                         frozenset({"b", "c"})),
                 id="a-cost-not-written-removes-nothing"),
    pytest.param(Plan(2, 1, pods=pods({"s": 1, "r": 0}, starting=("s",)), quiesce=("s",)),
                 {"s": 1}, True,
                 Settled(2, quiesce.DRAINING, "quiesced 1 pod(s), 0 drained, 1 still finishing "
                         "their tasks", frozenset({"s"})),
                 id="a-busy-starting-pod-is-the-victim"),
    pytest.param(Plan(3, 1, pods=pods({"s": 1, "r": 0, "t": 0}, starting=("s",)),
                      quiesce=("s", "t")), {"s": 1, "t": 0}, True,
                 Settled(3, quiesce.DRAINING, "quiesced 2 pod(s), 1 drained, 1 still finishing "
                         "their tasks, 1 kept while the ReplicaSet would delete a busy pod first "
                         "(not yet Ready, Pending or unscheduled)", frozenset({"s", "t"})),
                 id="a-drained-victim-kept-behind-a-busy-starting-pod"),
])
def test_the_reply_settles_the_count(plan: Plan, after: dict[str, int], annotated: bool,
                                     expected: Settled) -> None:
    assert plan.settle(after, annotated=annotated) == expected


def test_costs_put_the_drained_victims_first() -> None:
    plan = Plan(3, 1, pods=pods(THREE), quiesce=("c", "b"))
    assert plan.costs({"c": 0, "b": 1}) == {"a": "2", "b": "1",
                                             "c": str(quiesce.VICTIM_DELETION_COST)}


def test_a_failed_write_defers_and_keeps_the_set() -> None:
    plan = Plan(3, 1, frozenset({"b"}), pods(THREE), ("c", "b"))
    assert plan.failed("ConnectionError") == Settled(
        3, quiesce.SCALE_IN_DEFERRED, "scale-in deferred: ConnectionError", frozenset({"b"}))


DECISION = policy.Decision(1, 3, "demand 1 / target 1 = 1; scale down 3 -> 1", 1,
                           policy.PolicyState(replicas=1), policy.Rule.SCALE_DOWN)


@pytest.mark.parametrize("settled, replicas, rule, reason", [
    pytest.param(quiesce.UNCHANGED, 1, policy.Rule.SCALE_DOWN, DECISION.reason,
                 id="no-scale-in"),
    pytest.param(Settled(1, None, "quiesced 2 pod(s), 2 drained"), 1, policy.Rule.SCALE_DOWN,
                 DECISION.reason + "; quiesced 2 pod(s), 2 drained", id="all-drained"),
    pytest.param(Settled(2, quiesce.DRAINING, "quiesced 2 pod(s), 1 drained"), 2,
                 policy.Rule.DRAINING, DECISION.reason + "; quiesced 2 pod(s), 1 drained; now 2",
                 id="held-by-a-busy-victim"),
])
def test_the_outcome_of_a_poll(settled: Settled, replicas: int, rule: policy.Rule,
                               reason: str) -> None:
    made = policy.Outcome(DECISION, settled)
    assert (made.replicas, made.previous, made.changed, made.rule, made.reason) == (
        replicas, 3, True, rule, reason)
    assert made.decision is DECISION  # the policy's decision and state are not rewritten


def test_the_scale_in_rules_are_policy_rules() -> None:
    for name in ("DRAINING", "WORKERS_NOT_PODS", "REPLICASET_ORDER", "SCALE_IN_DEFERRED"):
        assert policy.Rule[name] == getattr(quiesce, name)
