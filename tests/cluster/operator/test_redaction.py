"""No password fragment reaches a TaskQueue's status, its Ready condition, its Events or the
operator's log (real kube-apiserver, the operator in-process); the CRD rejects a password in
spec.redis.url at admission."""

from __future__ import annotations

import base64
import logging
from typing import Any

import pytest

from taskqueue_devcluster import ControlPlane
from tests.cluster.operator.test_operator import Start, condition
from tests.helpers.kube import apply, get, taskqueue
from tests.helpers.wait import wait_for

# a base64 password as `openssl rand -base64 18` prints it: '/' and '+' unencoded
PASSWORD = "Zm9vYmFy/cXV4LWJheg+c2VjcmV0"
FRAGMENTS = ("Zm9vYmFy", "cXV4LWJheg", "c2VjcmV0", PASSWORD)


def _leaks(text: str) -> list[str]:
    return [f for f in FRAGMENTS if f in text]


@pytest.mark.parametrize(
    "url",
    [
        pytest.param(f"redis://:{PASSWORD}@127.0.0.1:6379/0", id="slash-in-password"),
        pytest.param(f"redis://default:{PASSWORD}@127.0.0.1:notaport/0", id="bad-port"),
    ],
)
def test_an_unparsable_secret_url_is_named_never_quoted(
    control_plane: ControlPlane, namespace: str, run_operator: Start,
    caplog: pytest.LogCaptureFixture, url: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "redis-url"},
              "data": {"url": base64.b64encode(url.encode()).decode()}}
    apply(control_plane, namespace, secret)
    run_operator(namespace)
    apply(control_plane, namespace, taskqueue(
        "leak", "", redis={"url": None, "urlSecretRef": {"name": "redis-url", "key": "url"}}))
    ready = wait_for("Ready=False", lambda: condition(control_plane, namespace, "leak", "Ready"))
    assert ready["status"] == "False"
    assert ready["message"].startswith(
        "spec.redis.urlSecretRef (Secret 'redis-url', key 'url'): port is not a number")
    status: dict[str, Any] = get(control_plane, "taskqueue", "leak", "-n", namespace)["status"]
    events = wait_for("a Warning Event", lambda: [
        e for e in (get(control_plane, "events", "-n", namespace) or {"items": []})["items"]
        if e["type"] == "Warning" and e["involvedObject"]["name"] == "leak"])
    assert any("spec.redis.urlSecretRef" in e["message"] for e in events)
    assert _leaks(str(status)) == []
    assert _leaks(str([e["message"] for e in events])) == []
    assert "spec.redis.urlSecretRef" in caplog.text
    assert _leaks(caplog.text) == []


@pytest.mark.parametrize(
    "url",
    [
        pytest.param(f"redis://:{PASSWORD}@redis:6379/0", id="userinfo-with-slash"),
        pytest.param("redis://user:p@ss@redis:6379/0", id="at-in-password"),
        pytest.param("redis://redis:6379/0?password=hunter2", id="query"),
    ],
)
def test_a_password_in_spec_redis_url_is_rejected_at_admission(
    control_plane: ControlPlane, crd: None, namespace: str, url: str
) -> None:
    proc = apply(control_plane, namespace, taskqueue("pw", url), check=False)
    assert proc.returncode != 0
    assert "spec.redis.url must not carry a password" in proc.stderr, proc.stderr
    assert "urlSecretRef" in proc.stderr
    assert get(control_plane, "taskqueue", "pw", "-n", namespace) is None


def test_a_url_without_a_password_is_admitted(
    control_plane: ControlPlane, crd: None, namespace: str
) -> None:
    proc = apply(control_plane, namespace, taskqueue("nopw", "redis://user@redis:6379/0?db=1"))
    assert proc.returncode == 0
