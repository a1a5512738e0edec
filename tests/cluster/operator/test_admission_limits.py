"""The real API server refuses, with the CRD's CEL rules and bounds, what the models refuse: two
names of a TaskQueue that are one Redis key, and numbers the worker cannot use; and it accepts
the near misses the models accept."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.api import manifest
from taskqueue_devcluster import ControlPlane
from tests.helpers.kube import apply, taskqueue


def spec_with(**fields: Any) -> dict[str, Any]:
    body = taskqueue("tq", "redis://r:6379/0")
    body["spec"].update(fields)
    return body


REFUSED = [
    pytest.param({"queues": [{"key": "q"}, {"key": "r"}], "retry": {"deadLetterKey": "r"}},
                 "spec.retry.deadLetterKey r is also a key in spec.queues",
                 id="dead-letter-list-is-a-queue"),
    pytest.param({"queues": [{"key": "q"}, {"key": "q:dead"}]},
                 "a queue key is another queue's key plus ':dead'",
                 id="queue-is-the-default-dead-letter"),
    pytest.param({"queues": [{"key": "a"}, {"key": "b"}, {"key": "b:dead"}]},
                 "a queue key is another queue's key plus ':dead'",
                 id="queue-is-another-queues-dead"),
    pytest.param({"queues": [{"key": "q"}, {"key": "q:delayed"}]},
                 "a queue key is one of the own keys of the TaskQueue with keyPrefix q ",
                 id="queue-is-the-delayed-zset"),
    pytest.param({"queues": [{"key": "q"}, {"key": "p:stats"}], "keyPrefix": "p"},
                 "a queue key is one of the own keys of the TaskQueue with keyPrefix p ",
                 id="queue-is-the-prefixs-stats-hash"),
    pytest.param({"queues": [{"key": "q"}, {"key": "p:processing:w1"}], "keyPrefix": "p"},
                 "with keyPrefix p (", id="queue-is-a-processing-list"),
    pytest.param({"queues": [{"key": "q"}, {"key": "q:unique:x"}]},
                 "with keyPrefix q (", id="queue-is-a-unique-marker"),
    pytest.param({"queues": [{"key": "q"}], "retry": {"deadLetterKey": "q:delayed"}},
                 "spec.retry.deadLetterKey q:delayed is one of the own keys of the TaskQueue with "
                 "keyPrefix q ", id="dead-letter-list-is-the-delayed-zset"),
    pytest.param({"queues": [{"key": "q"}], "keyPrefix": "p",
                  "retry": {"deadLetterKey": "p:running:1"}},
                 "spec.retry.deadLetterKey p:running:1 is one of the own keys",
                 id="dead-letter-list-is-a-lease"),
    pytest.param({"worker": {"terminationGracePeriodSeconds": 10_000_000_000}},
                 "spec.worker.terminationGracePeriodSeconds: Invalid value", id="grace-1e10"),
    pytest.param({"worker": {"taskTimeoutSeconds": 1e12}},
                 "spec.worker.taskTimeoutSeconds: Invalid value", id="task-timeout-huge"),
    pytest.param({"worker": {"idempotency": {"windowSeconds": 1e15}}},
                 "spec.worker.idempotency.windowSeconds: Invalid value", id="window-huge"),
    pytest.param({"retry": {"backoffSeconds": 1e9}}, "spec.retry.backoffSeconds: Invalid value",
                 id="backoff-huge"),
    pytest.param({"scaling": {"maxReplicas": 1_000_000}},
                 "spec.scaling.maxReplicas: Invalid value", id="replicas-huge"),
    pytest.param({"queues": [{"key": "q"}], "scaling": {"targetWaitSeconds": {"q": 1e9}}},
                 "spec.scaling.targetWaitSeconds.q: Invalid value", id="wait-target-huge"),
    pytest.param({"queues": [{"key": "q"}],
                  "schedules": [{"name": "a", "cron": "@daily", "queue": "nope"}]},
                 "spec.schedules[].queue is not in spec.queues", id="schedule-queue-unknown"),
    pytest.param({"queues": [{"key": "q"}],
                  "schedules": [{"name": "a", "cron": "@daily", "queue": "q"},
                                {"name": "a", "cron": "@hourly", "queue": "q"}]},
                 "spec.schedules: each name must be used once", id="schedule-name-twice"),
    pytest.param({"queues": [{"key": "q"}],
                  "schedules": [{"name": "a", "cron": "* * *", "queue": "q"}]},
                 "spec.schedules[0].cron", id="schedule-cron-three-fields"),
    pytest.param({"queues": [{"key": "q"}],
                  "schedules": [{"name": "a", "cron": "@daily", "queue": "q",
                                 "catchUpSeconds": 1e12}]},
                 "spec.schedules[0].catchUpSeconds: Invalid value", id="schedule-catch-up-huge"),
]


@pytest.mark.parametrize("fields, message", REFUSED)
def test_the_api_server_refuses_what_the_models_refuse(
    control_plane: ControlPlane, crd: None, namespace: str, fields: dict[str, Any],
    message: str,
) -> None:
    body = spec_with(**fields)
    with pytest.raises(manifest.ManifestError):
        manifest.parse(body)
    proc = apply(control_plane, namespace, body, check=False)
    assert proc.returncode != 0, "the API server accepted it"
    assert message in proc.stderr, proc.stderr


ACCEPTED = [
    pytest.param({"queues": [{"key": "q"}, {"key": "q:deadline"}]}, id="dead-as-a-word-prefix"),
    pytest.param({"queues": [{"key": "q"}, {"key": "q:processing"}]},
                 id="processing-without-an-id"),
    pytest.param({"queues": [{"key": "q"}, {"key": "q:delayed2"}]}, id="delayed-plus-a-digit"),
    pytest.param({"queues": [{"key": "q"}, {"key": "q:delayed"}], "keyPrefix": "jobs"},
                 id="another-prefix-frees-the-name"),
    pytest.param({"queues": [{"key": "q"}, {"key": "r"}], "retry": {"deadLetterKey": "r:dead"}},
                 id="dead-letter-list-of-its-own"),
    pytest.param({"worker": {"terminationGracePeriodSeconds": 604_800,
                             "taskTimeoutSeconds": 604_800,
                             "idempotency": {"windowSeconds": 31_536_000}},
                  "scaling": {"maxReplicas": 10_000}}, id="every-maximum"),
    pytest.param({"queues": [{"key": "q"}],
                  "schedules": [{"name": "nightly", "cron": "30 2 * * *", "queue": "q",
                                 "timeZone": "Australia/Sydney", "overlap": "Skip"},
                                {"name": "tick", "cron": "*/5 * * * * *", "queue": "q"}]},
                 id="schedules"),
]


@pytest.mark.parametrize("fields", ACCEPTED)
def test_the_api_server_accepts_what_the_models_accept(
    control_plane: ControlPlane, crd: None, namespace: str, fields: dict[str, Any],
) -> None:
    body = spec_with(**fields)
    manifest.parse(body)
    proc = apply(control_plane, namespace, body, check=False)
    assert proc.returncode == 0, proc.stderr
