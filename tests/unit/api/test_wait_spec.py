"""scaling.targetWaitSeconds in the manifest: accepted per queue, bad values named with the fix."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import manifest


def tq(waits: Any) -> dict[str, Any]:
    return {"kind": "TaskQueue", "spec": {
        "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "high"}, {"key": "low"}],
        "scaling": {"targetWaitSeconds": waits}}}


def test_per_queue_targets_are_accepted() -> None:
    spec = manifest.parse(tq({"high": 1, "low": 30.5})).spec
    assert spec.scaling.targetWaitSeconds == {"high": 1.0, "low": 30.5}


@pytest.mark.parametrize("waits, message", [
    pytest.param({"nope": 1}, "scaling.targetWaitSeconds names ['nope'], not in spec.queues",
                 id="unknown-queue"),
    pytest.param({"high": 0}, "targetWaitSeconds: for 'high', 0 is out of range; use a number "
                 "of seconds > 0",
                 id="zero"),
    pytest.param({"high": -2}, "use a number of seconds > 0", id="negative"),
    pytest.param({"high": "soon"}, "targetWaitSeconds.high", id="not-a-number"),
])
def test_bad_targets_name_the_field_and_the_fix(waits: Any, message: str) -> None:
    with pytest.raises(manifest.ManifestError, match=None) as info:
        manifest.parse(tq(waits))
    assert message in str(info.value)


def expected(seconds: Any) -> dict[str, Any]:
    doc = tq({"high": 2})
    doc["spec"]["scaling"]["expectedServiceSeconds"] = seconds
    return doc


def test_expected_service_times_are_accepted_per_queue() -> None:
    spec = manifest.parse(expected({"low": 4, "high": 0.25})).spec
    assert spec.scaling.expectedServiceSeconds == {"low": 4.0, "high": 0.25}


@pytest.mark.parametrize("seconds, message", [
    pytest.param({"nope": 1}, "scaling.expectedServiceSeconds names ['nope'], not in "
                 "spec.queues", id="unknown-queue"),
    pytest.param({"low": 0}, "expectedServiceSeconds: for 'low', 0 is out of range; use a "
                 "number of seconds > 0",
                 id="zero"),
    pytest.param({"low": -1}, "use a number of seconds > 0", id="negative"),
    pytest.param({"low": "slow"}, "expectedServiceSeconds.low", id="not-a-number"),
])
def test_bad_expected_service_times_name_the_field_and_the_fix(seconds: Any,
                                                               message: str) -> None:
    with pytest.raises(manifest.ManifestError) as info:
        manifest.parse(expected(seconds))
    assert message in str(info.value)
