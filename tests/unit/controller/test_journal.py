"""What a poll appends to the history and the decision log (`controller.journal`), pure: when a
decision entry is written, when a history point is due, and what a point says."""

from __future__ import annotations

from dataclasses import replace

import pytest

from taskqueue.api.historyspec import HistorySpec
from taskqueue.controller import journal
from taskqueue.scaling import policy, quiesce
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.wire import history, keys

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z, on every interval's boundary
R = policy.Rule
SCHEMA = keys.KeySchema(prefix="jobs", queues=(keys.QueueRef("jobs"), keys.QueueRef("low")),
                        dead_letter="jobs:dead")
FLEET = journal.Fleet(desired=2, pods=3, ready=2)


def outcome(previous: int, replicas: int, rule: policy.Rule = R.HOLD, *,
            quiesced: frozenset[str] | None = frozenset(), settled: int | None = None,
            settled_rule: str | None = None) -> policy.Outcome:
    decision = policy.Decision(replicas, previous, f"why {replicas}", replicas,
                               policy.PolicyState(replicas=replicas), rule)
    return policy.Outcome(decision, quiesce.Settled(settled, settled_rule, "", quiesced))


def entry(replicas: int, rule: str = "hold", quiesced: tuple[str, ...] = ()
          ) -> history.DecisionEntry:
    return history.DecisionEntry(t=0, previous=replicas, replicas=replicas, recommendation=0,
                                 rule=rule, reason="", quiesced=quiesced)


OBS = QueueObservation(at=T0, backlog={"jobs": 4, "low": 1},
                       workers=(WorkerObservation("w1", int((T0 + 30) * 1000), 2),))


@pytest.mark.parametrize("made, previous, written", [
    pytest.param(outcome(2, 2), None, True, id="the-first-poll-of-an-operator"),
    pytest.param(outcome(2, 2), entry(2), False, id="nothing-changed"),
    pytest.param(outcome(2, 3, R.SCALE_UP), entry(2), True, id="the-count-changes"),
    pytest.param(outcome(2, 2, R.STABILISATION_WINDOW), entry(2, "stabilisation-window"), False,
                 id="held-by-the-window-again"),
    pytest.param(outcome(2, 2, R.IDLE_COOLDOWN), entry(2, "stabilisation-window"), True,
                 id="the-rule-changes-the-count-does-not"),
    pytest.param(outcome(2, 2, R.HOLD), entry(2, "scale-up"), False,
                 id="hold-after-a-scale-up-is-the-same-rule"),
    pytest.param(outcome(2, 2, R.HOLD), entry(2, "stabilisation-window"), True,
                 id="the-window-lets-go"),
    pytest.param(outcome(3, 2, R.SCALE_DOWN, quiesced=frozenset({"p1"}), settled=3,
                         settled_rule=quiesce.DRAINING), entry(3, "hold"), True,
                 id="a-victim-quiesced-the-scale-in-waits"),
    pytest.param(outcome(3, 2, R.SCALE_DOWN, quiesced=frozenset({"p1"}), settled=3,
                         settled_rule=quiesce.DRAINING), entry(3, "draining", ("p1",)), False,
                 id="still-draining"),
    pytest.param(outcome(3, 2, R.SCALE_DOWN, quiesced=frozenset({"p1", "p2"}), settled=3,
                         settled_rule=quiesce.DRAINING), entry(3, "draining", ("p1",)), True,
                 id="another-pod-quiesced"),
    pytest.param(outcome(5, 5), entry(3), True,
                 id="scaled-by-hand-the-operator-holds-the-new-count"),
    pytest.param(outcome(3, 3, R.REDIS_UNREADABLE, quiesced=None), entry(3, "redis-unreadable"),
                 False, id="redis-still-unreadable"),
])
def test_when_a_decision_entry_is_written(made: policy.Outcome,
                                          previous: history.DecisionEntry | None,
                                          written: bool) -> None:
    got = journal.decision_entry(made, OBS, previous=previous, now=T0)
    assert (got is not None) is written
    if got is not None:
        assert (got.previous, got.replicas, got.rule, got.reason, got.t) == (
            made.previous, made.replicas, str(made.rule), made.reason, journal.ms(T0))


def test_a_decision_entry_says_what_the_poll_did() -> None:
    made = outcome(3, 1, R.SCALE_DOWN, quiesced=frozenset({"p2", "p1"}), settled=2,
                   settled_rule=quiesce.REPLICASET_ORDER)
    got = journal.decision_entry(made, OBS, previous=None, now=T0)
    assert got == history.DecisionEntry(
        t=journal.ms(T0), previous=3, replicas=2, recommendation=1, rule="replicaset-order",
        reason="why 1; now 2", backlog=5, inflight=2, quiesced=("p1", "p2"), removed=1)


def test_while_redis_cannot_be_read_the_counts_are_unknown_and_the_quiesced_pods_kept() -> None:
    got = journal.decision_entry(outcome(3, 3, R.REDIS_UNREADABLE, quiesced=None), None,
                                 previous=entry(3, "hold", ("p1",)), now=T0)
    assert got is not None
    assert (got.backlog, got.inflight, got.quiesced) == (None, None, ("p1",))


@pytest.mark.parametrize("last, now, interval, due", [
    pytest.param(T0 + 1, T0 + 9, 10, False, id="within-one-interval"),
    pytest.param(T0 + 9, T0 + 10, 10, True, id="the-boundary-passed"),
    pytest.param(T0 + 9.9, T0 + 10.1, 10, True, id="a-short-first-interval"),
    pytest.param(T0, T0 + 9.999, 10, False, id="just-before-the-next-boundary"),
    pytest.param(T0 + 3, T0 + 47, 10, True, id="polls-slower-than-the-interval"),
    pytest.param(T0 + 5, T0 + 59, 60, False, id="a-minute-interval"),
])
def test_when_a_history_point_is_due(last: float, now: float, interval: float,
                                     due: bool) -> None:
    assert journal.point_due(last, now, interval) is due


BASE = QueueObservation(
    at=T0, backlog={"jobs": 10, "low": 0}, completed_total=100, failed_total=4,
    taken={"jobs": 50, "low": 7}, service={"jobs": (100.0, 50)},
    service_sq={"jobs": (250.0, 50)}, waited={"jobs": (40, 10, 0)})
END = QueueObservation(
    at=T0 + 10.004, backlog={"jobs": 6, "low": 2}, completed_total=130, failed_total=5,
    taken={"jobs": 80, "low": 9}, service={"jobs": (160.5, 80), "low": (1.0, 2)},
    service_sq={"jobs": (400.0, 80), "low": (0.5, 1)}, waited={"jobs": (140, 30, 0)},
    oldest_enqueued_at={"jobs": T0 + 8.8},
    workers=(WorkerObservation("w1", int((T0 + 40) * 1000), 3),
             WorkerObservation("gone", int((T0 - 40) * 1000), 0)))


def test_a_history_point_covers_the_interval_since_the_last_one() -> None:
    point = journal.history_point(BASE, END, fleet=FLEET, queues=("jobs", "low"))
    assert (point.t, point.dt) == (journal.ms(T0 + 10.004), 10_004)
    assert (point.desired, point.replicas, point.ready, point.inflight, point.workers) == (
        2, 3, 2, 3, 1)
    assert (point.completed, point.failed) == (30, 1)
    # jobs: 4 fewer queued + 30 taken = 26 arrived; the workers reported 30 attempts of 60.5 s,
    # squares 150 s^2 over the same 30; 100 waits measured, 20 over 0.5 s, none over 1 s: the
    # 5 slowest are 3/4 of the way from 0.5 s to 1 s (linear between the edges)
    assert point.queues["jobs"] == history.QueuePoint(
        backlog=6, arrived=26, attempts=30, service_ms=60_500, service_sq_ms2=150_000_000,
        oldest_ms=1_204, p95_wait_ms=875)
    # low: 2 more queued + 2 taken; its first reports (1 of the 2 attempts with its square)
    assert point.queues["low"] == history.QueuePoint(
        backlog=2, arrived=4, attempts=2, service_ms=1_000, service_sq_ms2=None, oldest_ms=None,
        p95_wait_ms=None)


def test_a_reset_stats_hash_makes_the_interval_s_counts_unknown() -> None:
    reset = replace(END, completed_total=3, failed_total=0, service={"jobs": (2.0, 1)},
                    waited={"jobs": (1, 0, 0)})
    point = journal.history_point(BASE, reset, fleet=FLEET, queues=("jobs",))
    assert (point.completed, point.failed) == (None, None)
    jobs = point.queues["jobs"]
    assert (jobs.backlog, jobs.arrived, jobs.attempts, jobs.service_ms, jobs.p95_wait_ms) == (
        6, None, None, None, None)


SPEC = HistorySpec(retentionSeconds=3600, intervalSeconds=10, decisions=50)


def after(j: journal.Journal, made: policy.Outcome, obs: QueueObservation | None, *,
          spec: HistorySpec = SPEC) -> journal.Journal:
    return journal.after_poll(j, spec=spec, schema=SCHEMA, outcome=made, observation=obs,
                              fleet=FLEET, now=obs.at if obs else T0)


def test_polls_append_a_decision_on_change_and_a_point_per_interval() -> None:
    j = after(journal.Journal(), outcome(0, 1, R.SCALE_UP), replace(BASE, at=T0 + 1))
    assert [a.key for a in j.pending] == [SCHEMA.decisions]  # the first point needs a base
    assert j.pending[0].maxlen == 50
    j = after(j, outcome(1, 1), replace(BASE, at=T0 + 3))
    assert len(j.pending) == 1
    j = after(j, outcome(1, 1), replace(END, at=T0 + 11))
    assert [a.key for a in j.pending] == [SCHEMA.decisions, SCHEMA.history]
    assert j.pending[1].maxlen == 360  # an hour of 10 s points
    assert j.pending[1].fields["dt"] == "10000"
    assert j.base is not None and j.base.at == T0 + 11


def test_while_redis_cannot_be_read_decisions_wait_and_no_point_is_made() -> None:
    j = after(journal.Journal(), outcome(1, 1), BASE)
    j = after(replace(j, pending=()), outcome(1, 1, R.REDIS_UNREADABLE, quiesced=None), None)
    assert [a.key for a in j.pending] == [SCHEMA.decisions]
    assert j.base is BASE


def test_pending_appends_are_capped() -> None:
    j = journal.Journal()
    for i in range(journal.MAX_PENDING + 10):
        j = after(j, outcome(i, i + 1, R.SCALE_UP), None)
    assert len(j.pending) == journal.MAX_PENDING
    assert j.pending[-1].fields["to"] == str(journal.MAX_PENDING + 10)


def test_retention_zero_writes_nothing_and_forgets() -> None:
    j = after(journal.Journal(), outcome(0, 1, R.SCALE_UP), BASE)
    off = HistorySpec(retentionSeconds=0)
    assert after(j, outcome(1, 2, R.SCALE_UP), END, spec=off) == journal.Journal()
