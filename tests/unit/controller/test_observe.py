"""How long one Redis observation may take before the poll counts Redis as unreachable."""

from __future__ import annotations

import pytest

from taskqueue.api.models import ScalingSpec
from taskqueue.controller import observe


@pytest.mark.parametrize("poll, expected", [
    pytest.param(1.0, 5.0, id="fast-poll-gets-the-floor"),
    pytest.param(2.0, 5.0, id="default-poll-gets-the-floor"),
    pytest.param(5.0, 5.0, id="at-the-floor"),
    pytest.param(30.0, 30.0, id="slow-poll-waits-its-interval"),
])
def test_a_read_may_take_the_poll_interval_but_not_less_than_the_floor(
    poll: float, expected: float
) -> None:
    assert observe.OBSERVE_TIMEOUT_FLOOR_SECONDS == 5.0
    assert observe.timeout(ScalingSpec(pollIntervalSeconds=poll)) == expected
