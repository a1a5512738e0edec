"""Flow control, the pure parts: the control-hash fields the operator and `taskqueue pause`
own, the spec's validation, and the policy's cap (rate x service time, maxInFlight, pause)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from taskqueue.api import models
from taskqueue.scaling import flowcap
from taskqueue.scaling.observation import QueueObservation
from taskqueue.scaling.policy import PolicyState, Rule, decide
from taskqueue.wire import flow
from taskqueue.wire.flow import QueueFlow
from tests.unit.scaling.test_policy import NOW, scaling

RATE_50 = (50, 1.0, 50)


# -- the control hash ----------------------------------------------------------------------------
@pytest.mark.parametrize("desired, current, to_set, to_delete", [
    pytest.param({"rate:q": "5 1 5"}, {}, {"rate:q": "5 1 5"}, [], id="a-new-limit"),
    pytest.param({"rate:q": "5 1 5"}, {"rate:q": "5 1 5"}, {}, [], id="unchanged"),
    pytest.param({}, {"rate:q": "5 1 5", "max:q": "3", "paused:q": "spec"}, {},
                 ["max:q", "paused:q", "rate:q"], id="limits-removed-from-the-spec"),
    pytest.param({}, {"paused-cli:q": "1700000000 ann"}, {}, [],
                 id="an-incident-pause-is-never-undone"),
    pytest.param({"paused:q": "spec"}, {"paused-cli:q": "1 ann"}, {"paused:q": "spec"}, [],
                 id="spec-pause-beside-an-incident-pause"),
])
def test_the_operator_writes_only_its_own_fields(
        desired: dict[str, str], current: dict[str, str], to_set: dict[str, str],
        to_delete: list[str]) -> None:
    assert flow.sync_plan(desired, current) == (to_set, to_delete)


@pytest.mark.parametrize("text, parsed", [
    ("200 1 10", (200, 1.0, 10)), ("3 0.5 1", (3, 0.5, 1)), (None, None), ("", None),
    ("0 1 1", None), ("5 0 1", None), ("5 1 0", None), ("five 1 1", None), ("5 1", None),
])
def test_a_rate_reads_as_the_script_reads_it(text: str | None, parsed: Any) -> None:
    assert flow.parse_rate(text) == parsed


def test_read_back_names_who_paused_and_what_is_held() -> None:
    control = {"rate:a": "50 1 50", "max:b": "10", "paused:b": "spec", "paused-cli:c": "9 bob"}
    state = {"held:b": "4", "tat:a": "1.5"}
    a, b, c = flow.read(["a", "b", "c"], control, state)
    assert a == QueueFlow("a", rate=RATE_50)
    assert (b.paused, b.paused_cli, b.max_in_flight, b.held, b.is_paused) == (
        True, None, 10, 4, True)
    assert (c.paused, c.paused_cli, c.is_paused, c.limited) == (False, "9 bob", True, True)


def test_the_declared_fields_round_trip() -> None:
    queues = [QueueFlow("a", rate=(200, 1.0, 10)), QueueFlow("b", max_in_flight=3, paused=True),
              QueueFlow("c")]
    fields = flow.control_fields(queues)
    assert fields == {"rate:a": "200 1 10", "max:b": "3", "paused:b": "spec"}
    assert flow.read(["a", "b", "c"], fields, {}) == tuple(queues)


# -- the spec -------------------------------------------------------------------------------------
def spec(**queue: Any) -> dict[str, Any]:
    return {"redis": {"url": "redis://r:6379"}, "queues": [{"key": "q", **queue}]}


def test_burst_defaults_to_the_limits_own_count() -> None:
    q = models.TaskQueueSpec.model_validate(spec(rateLimit={"tasks": 50})).queues[0]
    assert q.rateLimit is not None
    assert (q.rateLimit.per_second, q.rateLimit.bucket) == (50.0, 50)


@pytest.mark.parametrize("field, value", [("rateLimit", {"tasks": 5}), ("maxInFlight", 3)])
def test_flow_limits_need_held_tasks(field: str, value: Any) -> None:
    with pytest.raises(ValidationError, match=rf"spec.queues\[0\].{field} needs delivery "
                                              "AtLeastOnce"):
        models.TaskQueueSpec.model_validate({**spec(**{field: value}), "delivery": "AtMostOnce"})


def test_a_pause_holds_for_at_most_once_workers_too() -> None:
    """Their blocking pops leave paused queues out (worker.flowseen)."""
    q = models.TaskQueueSpec.model_validate(
        {**spec(paused=True), "delivery": "AtMostOnce"}).queues[0]
    assert q.paused


@pytest.mark.parametrize("bad", [
    {"rateLimit": {"tasks": 0}}, {"rateLimit": {"tasks": 1, "perSeconds": 0}},
    {"rateLimit": {"tasks": 1, "burst": 0}}, {"maxInFlight": 0}])
def test_limits_below_one_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        models.TaskQueueSpec.model_validate(spec(**bad))


# -- the cap --------------------------------------------------------------------------------------
@pytest.mark.parametrize("flows, busy, service, concurrency, expected", [
    pytest.param([QueueFlow("e", rate=RATE_50)], {"e": True}, {"e": 0.4}, 8,
                 (3, flowcap.RATE_LIMIT_CAP), id="rate-x-service-time-plus-headroom"),
    pytest.param([QueueFlow("e", max_in_flight=10)], {"e": True}, {}, 3,
                 (4, flowcap.IN_FLIGHT_CAP), id="max-in-flight-over-concurrency"),
    pytest.param([QueueFlow("e", rate=RATE_50, max_in_flight=4)], {"e": True}, {"e": 0.4}, 2,
                 (2, flowcap.IN_FLIGHT_CAP), id="the-tighter-limit-binds"),
    pytest.param([QueueFlow("e", paused=True)], {"e": True}, {}, 4,
                 (0, flowcap.PAUSED_QUEUE), id="paused-needs-none"),
    pytest.param([QueueFlow("e", paused_cli="1 ann")], {"e": True}, {}, 4,
                 (0, flowcap.PAUSED_QUEUE), id="paused-by-the-cli-needs-none"),
    pytest.param([QueueFlow("e", rate=RATE_50), QueueFlow("free")], {"e": True, "free": True},
                 {"e": 0.4}, 8, None, id="a-busy-queue-without-limit-is-unbounded"),
    pytest.param([QueueFlow("e", rate=RATE_50), QueueFlow("free")], {"e": True, "free": False},
                 {"e": 0.4}, 8, (3, flowcap.RATE_LIMIT_CAP), id="an-idle-free-queue-needs-none"),
    pytest.param([QueueFlow("e", rate=RATE_50)], {"e": True}, {}, 8,
                 (1, flowcap.RATE_LIMIT_CAP), id="rate-without-a-service-time-holds-one-pod"),
])
def test_the_cap(flows: list[QueueFlow], busy: dict[str, bool], service: dict[str, float],
                 concurrency: int, expected: tuple[int, str] | None) -> None:
    found = flowcap.cap(flows, busy=busy, service=service, concurrency=concurrency)
    assert (None if found is None else (found.replicas, found.rule)) == expected


def test_the_reason_says_what_caps_the_fleet() -> None:
    found = flowcap.cap([QueueFlow("emails", rate=RATE_50)], busy={"emails": True},
                        service={"emails": 0.4}, concurrency=1)
    assert found is not None
    assert "rateLimit of emails: 50/s x 0.4 s = 20 slots (+5%-10%)" in found.why
    assert found.replicas == 22


def backlog(n: int) -> QueueObservation:
    return QueueObservation(at=NOW, backlog={"q": n}, completed_total=0, workers=())


@pytest.mark.parametrize("queue, replicas, rule", [
    pytest.param(QueueFlow("q", max_in_flight=10), 2, Rule.IN_FLIGHT_CAP, id="in-flight-cap"),
    pytest.param(QueueFlow("q", paused=True), 0, Rule.PAUSED_QUEUE, id="paused-queue"),
    pytest.param(QueueFlow("q"), 10, Rule.MAX_REPLICAS, id="no-limit-climbs-to-max"),
])
def test_a_backlog_the_limits_cannot_use_does_not_scale_the_fleet(
        queue: QueueFlow, replicas: int, rule: Rule) -> None:
    decision = decide(spec=scaling(), observation=backlog(5000), state=PolicyState(replicas=1),
                      now=NOW, concurrency=8, queue_order=("q",), flow=(queue,))
    assert (decision.replicas, decision.rule) == (replicas, rule)
    if rule is not Rule.MAX_REPLICAS:
        assert "capped by" in decision.reason


def test_a_rate_limited_queue_is_held_at_its_need_once_the_service_time_is_expected() -> None:
    decision = decide(spec=scaling(expectedServiceSeconds={"q": 0.4}), observation=backlog(5000),
                      state=PolicyState(replicas=1), now=NOW, concurrency=8, queue_order=("q",),
                      flow=(QueueFlow("q", rate=RATE_50),))
    assert (decision.replicas, decision.rule) == (3, Rule.RATE_LIMIT_CAP)
    assert "rateLimit of q: 50/s x 0.4 s = 20 slots" in decision.reason
