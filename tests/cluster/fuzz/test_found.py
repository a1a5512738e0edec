"""Defects the fuzz suite found where the models and the real API server disagreed: the API server
took a TLS setting without rediss://, Sentinel with mode cluster, a certKey without keyKey, a
sentinel address that is not host:port and a wait target or service time of a key that is no
queue, which the models refuse; a queue key with a vertical tab or a no-break space got one verdict
from the models and another from the API server (their regex engines read a space class
differently). Each fails on the code before its fix."""

from __future__ import annotations

import json

import pytest

from taskqueue.api import manifest
from taskqueue_devcluster import ControlPlane

ADMISSION_REFUSED = [
    pytest.param({"redis": {"url": "redis://r:6379/0", "tls": {"secretName": "t"}}},
                 "spec.redis.tls needs a TLS URL", id="tls-without-rediss"),
    pytest.param({"redis": {"url": "redis://r:6379/0", "mode": "cluster",
                            "sentinel": {"masterName": "m", "addresses": ["s:26379"]}}},
                 "set spec.redis.mode cluster or spec.redis.sentinel, not both",
                 id="sentinel-and-cluster"),
    pytest.param({"redis": {"url": "rediss://r:6379/0",
                            "tls": {"secretName": "t", "certKey": "c"}}},
                 "set both certKey and keyKey", id="cert-without-key"),
    pytest.param({"redis": {"url": "redis://r:6379/0",
                            "sentinel": {"masterName": "m", "addresses": ["s:port"]}}},
                 "spec.redis.sentinel.addresses[0]", id="sentinel-address-not-host-port"),
    pytest.param({"scaling": {"targetWaitSeconds": {"other": 5}}},
                 "spec.scaling.targetWaitSeconds names a key that is not in spec.queues",
                 id="wait-target-of-no-queue"),
    pytest.param({"scaling": {"expectedServiceSeconds": {"other": 1}}},
                 "spec.scaling.expectedServiceSeconds names a key that is not in spec.queues",
                 id="service-time-of-no-queue"),
]


@pytest.mark.cluster
@pytest.mark.parametrize(("fields", "message"), ADMISSION_REFUSED)
def test_the_api_server_refuses_what_the_models_refuse(
        control_plane: ControlPlane, crd: None, namespace: str, fields: dict[str, object],
        message: str) -> None:
    spec = {"redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "q"}], **fields}
    body = {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
            "metadata": {"name": "tq"}, "spec": spec}
    with pytest.raises(manifest.ManifestError):
        manifest.parse(body)
    proc = control_plane.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-",
                                 input=json.dumps(body), check=False)
    assert proc.returncode != 0, "the API server accepted it"
    assert message in proc.stderr, proc.stderr


SAME_VERDICT = [
    pytest.param({"queues": [{"key": "a\vb"}]}, False, id="key-with-a-vertical-tab"),
    pytest.param({"queues": [{"key": "a\x1fb"}]}, False, id="key-with-a-control-character"),
    pytest.param({"queues": [{"key": "a\u00a0b"}]}, True, id="key-with-a-no-break-space"),
    pytest.param({"queues": [{"key": "q"}], "worker": {"handler": "é:f"}}, False,
                 id="handler-not-ascii"),
    pytest.param({"queues": [{"key": "q"}], "redis": {"url": "redis://r:6379/0", "sentinel": {
        "masterName": "m\u2003", "addresses": ["s:26379"]}}}, True,
                 id="master-name-with-an-em-space"),
]


@pytest.mark.cluster
@pytest.mark.parametrize(("fields", "accepted"), SAME_VERDICT)
def test_the_models_and_the_api_server_read_a_pattern_alike(
        control_plane: ControlPlane, crd: None, namespace: str, fields: dict[str, object],
        accepted: bool) -> None:
    """`\\s` and `\\w` in a pattern are ASCII to the API server (Go) and Unicode to pydantic
    (Rust): a key with a vertical tab or a no-break space, a handler with 'é', got two verdicts."""
    body = {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
            "metadata": {"name": "tq"},
            "spec": {"redis": {"url": "redis://r:6379/0"}, **fields}}
    try:
        manifest.parse(body)
    except manifest.ManifestError:
        model = False
    else:
        model = True
    proc = control_plane.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-",
                                 input=json.dumps(body), check=False)
    assert (model, proc.returncode == 0) == (accepted, accepted), proc.stderr
