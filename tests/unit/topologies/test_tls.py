"""spec.redis.tls without a server: the worker pod mounts the Secret and carries no secret in its
env, bad TLS specs say what to fix, the operator's TLS folder follows the Secret's contents (TLS
on a real redis-server: tests/redis/topologies/test_tls.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from taskqueue.api import models
from taskqueue.controller import tlsfiles, workload
from tests.redis.topologies.manifests import taskqueue

TLS = {"secretName": "redis-tls", "caKey": "ca.crt", "certKey": "tls.crt", "keyKey": "tls.key"}


def test_the_worker_pod_mounts_the_secret_and_carries_no_secret_in_env() -> None:
    tq = models.TaskQueue.model_validate(taskqueue("rediss://r:6380/0", redis={
        "urlSecretRef": {"name": "redis-url", "key": "url"}, "tls": TLS}))
    pod = workload.build_deployment(tq, uid="u", replicas=1)["spec"]["template"]["spec"]
    assert {"name": "redis-tls", "secret": {"secretName": "redis-tls", "defaultMode": 0o444}
            } in pod["volumes"]
    container = pod["containers"][0]
    assert {"name": "redis-tls", "readOnly": True, "mountPath": models.REDIS_TLS_DIR
            } in container["volumeMounts"]
    assert container["securityContext"]["runAsNonRoot"] is True  # with the securityContext
    for env in container["env"]:  # values are references to Secrets, or no secret at all
        assert "valueFrom" in env or env["name"] in ("TASKQUEUE_MANIFEST",
                                                     "TASKQUEUE_WORKER_SETTINGS")
    assert "BEGIN" not in json.dumps(pod)


@pytest.mark.parametrize(
    ("redis_spec", "message"),
    [
        pytest.param({"url": "redis://r", "tls": TLS}, "use rediss://", id="plain-url"),
        pytest.param({"url": "rediss://r", "tls": {"secretName": "s", "certKey": "c"}},
                     "both certKey and keyKey", id="half-a-pair"),
    ],
)
def test_bad_tls_specs_say_what_to_fix(redis_spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        models.RedisSpec.model_validate(redis_spec)


def test_the_operators_tls_folder_follows_the_secrets_contents() -> None:
    tls = models.RedisTLSSpec(secretName="s")
    first = tlsfiles.write("ns", tls, {"ca.crt": "one"})
    assert tlsfiles.write("ns", tls, {"ca.crt": "one"}) == first
    second = tlsfiles.write("ns", tls, {"ca.crt": "two"})
    assert second != first and (second / "ca.crt").read_text() == "two"
