"""A heavy tail of service times is priced in the steady fleet only where a pod started for it
would come too late: a queue whose target is at least podStartupSeconds is sized for a squared
coefficient of variation of at most `waitpolicy.PRICED_CV2`, a tighter target for what the
workers measured (`waitpolicy.priced_cv2`)."""

from __future__ import annotations

import pytest

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling import waitpolicy
from tests.helpers.scaling import one_poll


def spec(*, target: float = 5.0, startup: int = 5) -> ScalingSpec:
    return ScalingSpec(maxReplicas=100, targetWaitSeconds={"tasks": target},
                       podStartupSeconds=startup, scaleDownStabilizationSeconds=0)


@pytest.mark.parametrize("cv2, target, startup, priced", [
    pytest.param(9.0, 5.0, 5, waitpolicy.PRICED_CV2, id="heavy-tail-target-of-a-start-up"),
    pytest.param(40.0, 30.0, 20, waitpolicy.PRICED_CV2, id="heavy-tail-longer-target"),
    pytest.param(9.0, 2.0, 5, 9.0, id="target-under-a-start-up-keeps-the-measured"),
    pytest.param(9.0, 5.0, 20, 9.0, id="slow-start-up-keeps-the-measured"),
    pytest.param(1.0, 5.0, 5, 1.0, id="exponential-unchanged"),
    pytest.param(0.0, 5.0, 5, 0.0, id="constant-unchanged"),
    pytest.param(None, 5.0, 5, None, id="not-measured-yet"),
    pytest.param(9.0, None, 5, 9.0, id="no-target"),
])
def test_priced_cv2(cv2: float | None, target: float | None, startup: int,
                    priced: float | None) -> None:
    assert waitpolicy.priced_cv2(spec(startup=startup), cv2=cv2, target=target) == priced


def replicas(*, cv2: float, startup: int) -> int:
    """What decide asks for 1 task/s of 2 s tasks with service cv2 `cv2` and a 5 s target (one
    task queued, 6 pods up)."""
    return one_poll(spec=spec(startup=startup), cv2=cv2).replicas


def test_a_heavy_tail_costs_no_more_than_cv2_2_where_a_pod_comes_in_time() -> None:
    assert replicas(cv2=9.0, startup=5) == replicas(cv2=2.0, startup=5)


def test_a_heavy_tail_is_priced_where_a_pod_comes_too_late() -> None:
    assert replicas(cv2=9.0, startup=20) > replicas(cv2=2.0, startup=20)
