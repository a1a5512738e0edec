"""spec.history: its defaults, and the history it may ask for bounded (the models; the CRD's CEL
rule is tests/unit/api/test_crd.py and, on the API server, tests/cluster/operator/test_operator.py).
"""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import limits, manifest


def spec(history: dict[str, Any] | None = None) -> Any:
    body: dict[str, Any] = {"redis": {"url": "redis://r"}, "queues": [{"key": "q"}]}
    if history is not None:
        body["history"] = history
    return manifest.parse({"kind": "TaskQueue", "spec": body}).spec.history


def test_by_default_a_day_of_10_s_points_and_1000_decisions() -> None:
    history = spec()
    assert (history.retentionSeconds, history.intervalSeconds, history.decisions) == (
        86400, 10, 1000)
    assert history.enabled and history.points == 8640


@pytest.mark.parametrize("history, points", [
    pytest.param({"retentionSeconds": 0}, 0, id="off"),
    pytest.param({"retentionSeconds": 25, "intervalSeconds": 10}, 3, id="a-part-interval-counts"),
    pytest.param({"retentionSeconds": 100_000, "intervalSeconds": 1}, 100_000, id="the-most"),
])
def test_points_of_a_retention(history: dict[str, Any], points: int) -> None:
    assert spec(history).points == points
    assert spec(history).enabled is (points > 0)


@pytest.mark.parametrize("history, problem", [
    pytest.param({"retentionSeconds": 100_001, "intervalSeconds": 1},
                 "100001 history points, more than 100000; shorten retentionSeconds or "
                 "lengthen intervalSeconds", id="too-many-points"),
    pytest.param({"retentionSeconds": limits.WEEK + 1}, "retentionSeconds", id="past-a-week"),
    pytest.param({"intervalSeconds": 0.5}, "intervalSeconds", id="interval-under-a-second"),
    pytest.param({"decisions": 0}, "decisions", id="no-decisions"),
    pytest.param({"decisions": limits.MAX_HISTORY_ENTRIES + 1}, "decisions",
                 id="too-many-decisions"),
])
def test_a_history_out_of_bounds_is_refused_naming_the_field(history: dict[str, Any],
                                                             problem: str) -> None:
    with pytest.raises((manifest.ManifestError, ValueError), match=problem):
        spec(history)
