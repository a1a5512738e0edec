"""spec.retry.deadLetterMaxLength without a server: its default and bounds, the stats field the
Lua helper names (`keys.DEAD_TRIMMED_FIELD`) and the operator's metric of the trimmed count.
tests/redis/queueops/test_dead_letter_cap.py runs the scripts that keep the cap."""

from __future__ import annotations

import pydantic
import pytest

from taskqueue.api import manifest
from taskqueue.controller import act, kube
from taskqueue.scaling import policy
from taskqueue.scaling.observation import QueueObservation
from taskqueue.telemetry import metrics
from taskqueue.wire import keys, scripts

CAP = 5


def test_the_operator_exports_the_trimmed_count() -> None:
    obs = QueueObservation(at=0.0, backlog={"q": 0}, dead_letter=CAP,
                           dead_letter_trimmed_total=42)
    decision = policy.Outcome(policy.Decision(replicas=1, previous=1, reason="",
                                              recommendation=1,
                                              state=policy.PolicyState(replicas=1),
                                              rule=policy.Rule.HOLD))
    deployment = kube.DeploymentState(name="tq-trim-worker", replicas=1, ready_replicas=1,
                                      selector={})
    act.record_metrics(kube.ObjectRef(namespace="ns", name="tq-trim", uid="u"), obs, decision,
                       deployment, 0.01)
    assert metrics.OPERATOR.get_sample_value(
        "taskqueue_dead_letter_trimmed", {"namespace": "ns", "taskqueue": "tq-trim"}) == 42


def _spec(retry: dict[str, object]) -> dict[str, object]:
    return {"kind": "TaskQueue", "spec": {"redis": {"url": "redis://localhost"},
                                          "queues": [{"key": "q"}], "retry": retry}}


def test_the_default_cap_is_ten_thousand() -> None:
    spec = manifest.parse(_spec({})).spec
    assert spec.retry.deadLetterMaxLength == keys.DEAD_LETTER_MAX_LENGTH == 10_000
    assert keys.KeySchema.from_spec(spec).dead_letter_max_length == 10_000


@pytest.mark.parametrize("value", [0, -1, 10_000_001, "100", 2.5])
def test_a_cap_out_of_range_is_refused(value: object) -> None:
    with pytest.raises((pydantic.ValidationError, manifest.ManifestError),
                       match="deadLetterMaxLength"):
        manifest.parse(_spec({"deadLetterMaxLength": value}))


def test_the_lua_helper_names_the_stats_field_keys_owns() -> None:
    assert f"'{keys.DEAD_TRIMMED_FIELD}'" in scripts.lua("fail")
