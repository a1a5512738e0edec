"""The pure status module: every status the operator writes is built here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from taskqueue.api.models import ScalingSpec
from taskqueue.controller import status as st
from taskqueue.scaling import policy, quiesce
from taskqueue.scaling.arrivals import Arrivals
from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.service import ServiceTimes
from taskqueue.scaling.waits import Waits
from taskqueue.wire.keys import WAIT_EDGES_SECONDS

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
OBS = QueueObservation(at=T0, backlog={"hi": 3, "lo": 1}, delayed=2, dead_letter=1,
                       workers=(WorkerObservation("w1", int((T0 + 30) * 1000), 2),),
                       oldest_enqueued_at={"hi": T0 - 9.6})


def decision(replicas: int = 2, previous: int = 2, reason: str = "steady",
             rule: policy.Rule = policy.Rule.HOLD, **state: Any) -> policy.Outcome:
    """A poll's outcome: the policy's decision, and no scale-in."""
    return policy.Outcome(policy.Decision(
        replicas=replicas, previous=previous, reason=reason, recommendation=replicas,
        state=policy.PolicyState(replicas=replicas, **state), rule=rule))


def cond(kind: str, status: str, at: str | None = None, reason: str = "R") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": "",
            "lastTransitionTime": at}


@pytest.mark.parametrize(
    ("ts", "text"),
    [
        pytest.param(None, None, id="none"),
        pytest.param(T0, "2026-01-01T00:00:00Z", id="utc"),
        pytest.param(T0 + 0.9, "2026-01-01T00:00:00Z", id="to-the-second"),
    ],
)
def test_iso(ts: float | None, text: str | None) -> None:
    assert st.iso(ts) == text


@pytest.mark.parametrize(
    ("text", "ts"),
    [
        pytest.param(None, None, id="none"),
        pytest.param("", None, id="empty"),
        pytest.param("not a time", None, id="garbage"),
        pytest.param("2026-01-01T00:00:00Z", T0, id="z"),
        pytest.param("2026-01-01T01:00:00+01:00", T0, id="offset"),
    ],
)
def test_from_iso(text: str | None, ts: float | None) -> None:
    assert st.from_iso(text) == ts


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param([], [cond("Ready", "True")], [cond("Ready", "True", "2026-01-01T00:00:00Z")],
                     id="new-condition-stamped-now"),
        pytest.param([cond("Ready", "True", "2025-01-01T00:00:00Z")],
                     [cond("Ready", "True", reason="Other")],
                     [cond("Ready", "True", "2025-01-01T00:00:00Z", reason="Other")],
                     id="same-status-keeps-time"),
        pytest.param([cond("Ready", "True", "2025-01-01T00:00:00Z")], [cond("Ready", "False")],
                     [cond("Ready", "False", "2026-01-01T00:00:00Z")],
                     id="flipped-status-stamped-now"),
        pytest.param([cond("Scaling", "True", "2025-01-01T00:00:00Z")], [cond("Ready", "True")],
                     [cond("Ready", "True", "2026-01-01T00:00:00Z"),
                      cond("Scaling", "True", "2025-01-01T00:00:00Z")],
                     id="others-kept-sorted-by-type"),
    ],
)
def test_merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]],
                          expected: list[dict[str, Any]]) -> None:
    assert st.merge_conditions(old, new, now=T0) == expected


def _conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


@pytest.mark.parametrize(
    ("observation", "error", "made", "counts", "conditions"),
    [
        pytest.param(OBS, None, decision(), {"totalBacklog": 4, "backlog": {"hi": 3, "lo": 1},
                                            "inFlight": 2, "delayed": 2, "deadLetter": 1,
                                            "oldestTaskAgeSeconds": 10, "workers": 1},
                     {"Ready": ("True", "DeploymentReady"), "RedisReachable": ("True", "Read"),
                      "Scaling": ("True", "Steady")}, id="read"),
        pytest.param(OBS, None, decision(), {"waitSeconds": {"hi": 9.6},
                                            "arrivalRate": {"hi": 0.0, "lo": 0.0},
                                            "serviceSeconds": None, "waitP95Seconds": {}},
                     {}, id="read-nothing-measured-yet"),
        pytest.param(OBS, None, decision(3, 2, "scale up 2 -> 3"), {"totalBacklog": 4},
                     {"Scaling": ("True", "Scaled")}, id="scaled"),
        pytest.param(OBS, None, decision(reason="holding 2", rule=policy.Rule.PAUSED),
                     {"totalBacklog": 4}, {"Scaling": ("False", "Paused")}, id="paused-by-rule"),
        pytest.param(OBS, None, decision(reason="paused queue drained; hold 2"),
                     {"totalBacklog": 4}, {"Scaling": ("True", "Steady")},
                     id="a-reason-that-says-paused-is-not-the-rule"),
        pytest.param(None, "redis://h:6379: ConnectionError", decision(reason="redis unreachable"),
                     dict.fromkeys(st.COUNTS),
                     {"RedisReachable": ("False", "Error"),
                      "Scaling": ("False", "RedisUnreachable")}, id="unreadable-counts-unknown"),
    ],
)
def test_build_status(observation: QueueObservation | None, error: str | None,
                      made: policy.Outcome, counts: dict[str, Any],
                      conditions: dict[str, tuple[str, str]]) -> None:
    previous = {"totalBacklog": 7, "conditions": []}
    status = st.build_status(previous, observation, made, deployment="w", ready_replicas=1,
                             error=error, generation=3, last_scale=None, now=T0)
    assert {k: status[k] for k in counts} == counts
    assert (status["desiredReplicas"], status["replicas"], status["observedGeneration"],
            status["reason"]) == (made.replicas, 1, 3, made.reason)
    assert _conditions(status).items() >= conditions.items()


@pytest.mark.parametrize(
    ("delayed", "due_soon", "next_due_at", "expected"),
    [
        pytest.param(0, 0, None, {"delayed": 0, "dueSoon": 0, "nextDueTime": None},
                     id="nothing-delayed"),
        pytest.param(3, 0, T0 + 3600, {"delayed": 3, "dueSoon": 0,
                                       "nextDueTime": "2026-01-01T01:00:00Z"},
                     id="delayed-not-due-soon"),
        pytest.param(3, 2, T0 + 4.7, {"delayed": 3, "dueSoon": 2,
                                      "nextDueTime": "2026-01-01T00:00:04Z"},
                     id="due-soon-next-to-the-second"),
    ],
)
def test_counts_of_the_delayed_set(delayed: int, due_soon: int, next_due_at: float | None,
                                   expected: dict[str, Any]) -> None:
    obs = QueueObservation(at=T0, backlog={"q": 0}, delayed=delayed, due_soon=due_soon,
                           next_due_at=next_due_at)
    counts = st.counts(obs, policy.PolicyState(replicas=1))
    assert {k: counts[k] for k in expected} == expected


def test_an_unknown_delayed_set_is_removed_not_zeroed() -> None:
    counts = st.counts(None, policy.PolicyState(replicas=1))
    assert {k: counts[k] for k in ("delayed", "dueSoon", "nextDueTime")} == dict.fromkeys(
        ("delayed", "dueSoon", "nextDueTime"))


def test_the_scale_in_s_count_and_note_are_the_status_s() -> None:
    # the policy wants 2 of 3, a victim still finishes its task: 3 stay, and the reason says why
    made = policy.Outcome(decision(2, 3, "demand 2 / target 1 = 2; scale down 3 -> 2").decision,
                          quiesce.Settled(3, quiesce.DRAINING, "quiesced 1 pod(s), 0 drained, "
                                          "1 still finishing their tasks", frozenset({"p"})))
    status = st.build_status(None, OBS, made, deployment="w", ready_replicas=3, error=None,
                             generation=1, last_scale=T0 - 60, now=T0)
    assert status["desiredReplicas"] == 3
    assert status["reason"].endswith("1 still finishing their tasks; now 3")
    assert status["lastScaleTime"] == "2025-12-31T23:59:00Z"
    assert _conditions(status)["Scaling"] == ("True", "Steady")


@pytest.mark.parametrize("build", [
    pytest.param(lambda: st.build_status(None, OBS, decision(), deployment="w", ready_replicas=1,
                                         error=None, generation=1, last_scale=None, now=T0),
                 id="after-a-poll"),
    pytest.param(lambda: st.build_status(None, None, decision(), deployment="w",
                                         ready_replicas=1, error="e", generation=1,
                                         last_scale=None, now=T0), id="redis-unreadable"),
])
def test_a_misspelt_status_field_fails_instead_of_being_dropped_by_the_api_server(
        monkeypatch: pytest.MonkeyPatch, build: Callable[[], st.Status]) -> None:
    real = st.counts
    monkeypatch.setattr(st, "counts", lambda *a: {**real(*a), "totalBaklog": 4})
    with pytest.raises(ValidationError, match="totalBaklog"):
        build()


def test_a_problem_status_is_checked_against_the_model() -> None:
    with pytest.raises(ValidationError, match="inflight"):
        st.problem_status({"inflight": 2}, "spec.x: bad", reason="InvalidSpec", now=T0)


def test_an_unknown_backlog_is_removed_not_kept_or_zeroed() -> None:
    before = st.build_status(None, OBS, decision(), deployment="w", ready_replicas=1,
                             error=None, generation=1, last_scale=None, now=T0)
    after = st.build_status(before, None, decision(reason="redis unreachable"), deployment="w",
                            ready_replicas=1, error="e", generation=1, last_scale=None,
                            now=T0 + 5)
    assert before["totalBacklog"] == 4
    assert after["totalBacklog"] is None  # null in the merge patch: removed from the object


def test_measured_fields_come_from_the_policy_rates() -> None:
    # 50 tasks into "hi" over 100 s, 20 completions holding 40 task-seconds: 0.5/s, 2 s each
    # and the workers measured 100 waits of "hi", 10 of them over 2 s, none over 3 s: p95 2.5 s
    hist = (100.0, 40.0, 30.0, 10.0, *(0.0,) * (len(WAIT_EDGES_SECONDS) - 3))
    rates = Rates(at=T0, arrivals=Arrivals(elapsed=100.0, elapsed_short=100.0,
                                           counts=(("hi", 50.0),), counts_short=(("hi", 50.0),)),
                  service=ServiceTimes(busy_seconds=40.0, completions=20.0),
                  waits=Waits(sums=(("hi", hist),)))
    fields = st.measured(OBS, policy.PolicyState(replicas=1, rates=rates))
    assert fields == {"waitSeconds": {"hi": 9.6}, "arrivalRate": {"hi": 0.5, "lo": 0.0},
                      "serviceSeconds": 2.0, "waitP95Seconds": {"hi": 2.5}}


def test_problem_status_keeps_the_rest() -> None:
    previous = {"totalBacklog": 2, "conditions": [cond("Ready", "True", "2025-01-01T00:00:00Z")]}
    status = st.problem_status(previous, "spec.x: bad", reason="InvalidSpec", now=T0)
    assert status["totalBacklog"] == 2 and status["reason"] == "spec.x: bad"
    assert status["conditions"] == [{"type": "Ready", "status": "False", "reason": "InvalidSpec",
                                     "message": "spec.x: bad",
                                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    assert "reason" not in previous


@pytest.mark.parametrize("shard", [pytest.param("op-1_ab12cd34", id="sharded"),
                                   pytest.param(None, id="not-sharded-removed")])
def test_status_names_the_replica_that_polled(shard: str | None) -> None:
    """status.shard: the replica of a sharded operator that wrote it; a status another replica
    (or an unsharded operator) wrote before is taken over, by a poll or a problem report."""
    previous = {"shard": "op-0_00000000", "conditions": []}
    polled = st.build_status(previous, OBS, decision(), deployment="w", ready_replicas=1,
                             error=None, generation=3, last_scale=None, now=T0, shard=shard)
    problem = st.problem_status(previous, "spec.x: bad", reason="InvalidSpec", now=T0,
                                shard=shard)
    assert polled["shard"] == problem["shard"] == shard


BASE = {"totalBacklog": 4, "oldestTaskAgeSeconds": 10, "lastActiveTime": "2026-01-01T00:00:00Z"}
MEASURED = {**BASE, "waitSeconds": {"q": 2.5}, "arrivalRate": {"q": 0.5}, "serviceSeconds": 1.0}
OLD = {**MEASURED, "oldestTaskAgeSeconds": 400, "waitSeconds": {"q": 400}}
"""A backlog nobody takes, 400 s old: its age shown is rewritten every 100 s."""
ANCIENT = {**MEASURED, "oldestTaskAgeSeconds": 100000}
NO_AGE = {"totalBacklog": 4, "inFlight": 2, "lastActiveTime": "2026-01-01T00:00:00Z"}
"""Busy with tasks of no known age (raw LPUSH payloads) or in flight only."""


@pytest.mark.parametrize(
    ("old", "new", "written", "expected"),
    [
        pytest.param(None, BASE, None, True, id="first"),
        pytest.param(BASE, BASE, T0, False, id="unchanged"),
        pytest.param(BASE, {**BASE, "totalBacklog": 3}, T0, True, id="count-changed"),
        pytest.param(BASE, {**BASE, "oldestTaskAgeSeconds": 12}, T0, False, id="drift-recent"),
        pytest.param(BASE, {**BASE, "oldestTaskAgeSeconds": 12}, T0 - st.STATUS_DRIFT_SECONDS,
                     True, id="drift-due"),
        pytest.param(BASE, {**BASE, "oldestTaskAgeSeconds": None}, T0, True,
                     id="age-gone-is-not-drift"),
        pytest.param(MEASURED, {**MEASURED, "waitSeconds": {"q": 3.0},
                                "arrivalRate": {"q": 0.7}, "serviceSeconds": 1.1}, T0, False,
                     id="measured-drift-recent"),
        pytest.param(MEASURED, {**MEASURED, "waitSeconds": {"q": 3.0}},
                     T0 - st.STATUS_DRIFT_SECONDS, True, id="measured-drift-due"),
        pytest.param(MEASURED, {**MEASURED, "serviceSeconds": None}, T0, True,
                     id="service-gone-is-not-drift"),
        pytest.param(OLD, {**OLD, "oldestTaskAgeSeconds": 490, "waitSeconds": {"q": 490},
                           "lastActiveTime": "2026-01-01T00:01:30Z"}, T0 - 90, False,
                     id="old-backlog-aging-waits-a-quarter-of-its-age"),
        pytest.param(OLD, {**OLD, "oldestTaskAgeSeconds": 500}, T0 - 100, True,
                     id="old-backlog-aging-due"),
        pytest.param(ANCIENT, {**ANCIENT, "oldestTaskAgeSeconds": 100120},
                     T0 - st.STATUS_DRIFT_MAX_SECONDS, True, id="aging-waits-at-most-the-cap"),
        pytest.param(OLD, {**OLD, "arrivalRate": {"q": 0.4}}, T0 - st.STATUS_DRIFT_SECONDS, True,
                     id="old-backlog-rate-drift-waits-the-floor"),
        pytest.param(OLD, {**OLD, "totalBacklog": 5}, T0 - 1, True,
                     id="old-backlog-count-changed-at-once"),
        pytest.param(NO_AGE, {**NO_AGE, "lastActiveTime": "2026-01-01T00:01:00Z"},
                     T0 - st.STATUS_DRIFT_SECONDS, False, id="busy-without-an-age-waits-the-cap"),
        pytest.param(NO_AGE, {**NO_AGE, "lastActiveTime": "2026-01-01T00:02:00Z"},
                     T0 - st.STATUS_DRIFT_MAX_SECONDS, True, id="busy-without-an-age-due"),
    ],
)
def test_due(old: dict[str, Any] | None, new: dict[str, Any], written: float | None,
             expected: bool) -> None:
    assert st.due(old, new, written=written, now=T0) is expected


def test_restart_slack_covers_the_aging_interval_of_the_status_written() -> None:
    scaling = ScalingSpec(pollIntervalSeconds=2)
    assert st.status_slack(scaling, BASE) == st.STATUS_DRIFT_SECONDS + 2
    assert st.status_slack(scaling, NO_AGE) == st.STATUS_DRIFT_MAX_SECONDS + 2
    assert st.status_slack(scaling, OLD) == 100 + 2
    assert st.status_slack(scaling, ANCIENT) == st.STATUS_DRIFT_MAX_SECONDS + 2


@pytest.mark.parametrize(
    ("status", "last_active"),
    [
        pytest.param(None, None, id="no-status"),
        pytest.param({"lastActiveTime": "2026-01-01T00:00:00Z", "totalBacklog": 0,
                      "inFlight": 0}, T0, id="idle-exact"),
        pytest.param({"lastActiveTime": "2026-01-01T00:00:00Z", "totalBacklog": 1}, T0 + 20,
                     id="busy-slack"),
        pytest.param({"lastActiveTime": "2026-01-01T00:00:00Z"}, T0 + 20,
                     id="unknown-counts-slack"),
    ],
)
def test_initial_state(status: dict[str, Any] | None, last_active: float | None) -> None:
    assert st.initial_state(status, slack=20).last_active == last_active


# -- the poll's own writes to Redis ---------------------------------------------------------------
def test_a_refused_write_is_a_false_condition_naming_the_refusal_and_its_fix() -> None:
    refused = "NoPermissionError: this user has no permissions to run the 'hset' command"
    status = st.with_writes({}, {"FlowControlWritten": None, "SchedulesFired": refused},
                            now=T0)
    assert _conditions(status) == {"FlowControlWritten": ("True", "Written"),
                                   "SchedulesFired": ("False", "SchedulesNotFired")}
    message = {c["type"]: c["message"] for c in status["conditions"]}["SchedulesFired"]
    assert message.startswith(f"schedules not fired: {refused} (")
    assert "python -m taskqueue.redisio.acl operator" in message


def test_a_write_not_attempted_keeps_what_its_condition_said() -> None:
    """Redis unreachable: no entry, so the last word on the write stays (RedisReachable says
    why); the write taken again turns it True with a new transition time."""
    refused = st.with_writes({}, {"FlowControlWritten": "ResponseError: OOM"}, now=T0)
    kept = st.with_writes(refused, {}, now=T0 + 10)
    assert kept["conditions"] == refused["conditions"]
    (back,) = st.with_writes(kept, {"FlowControlWritten": None}, now=T0 + 20)["conditions"]
    assert (back["status"], back["lastTransitionTime"]) == ("True", st.iso(T0 + 20))
