"""Fuzz: the real API server (the CRD's schema, bounds and CEL rules) and the models agree on
generated TaskQueues: each refuses what the other refuses, but for the differences listed in
`DIFFERENCES` (docs/install.md, "Keys and numbers are checked at admission too").

Each example is one `kubectl create --dry-run=server` (nothing is stored); metadata, apiVersion
and kind are the API server's own business and are kept valid.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import assume, given

from taskqueue.api import manifest
from taskqueue_devcluster import ControlPlane
from tests.redis.fuzz import manifests
from tests.redis.fuzz.budget import examples

pytestmark = pytest.mark.cluster

DIFFERENCES = ("spec.redis: url: ",)
"""Model problems the CRD does not state: the parts of a Redis URL past its scheme and password
(`redact.problem`: port, host, database, query options), checked by the operator (which
reports InvalidSpec), the worker and the CLI at start."""


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _model_problem(doc: dict[str, Any]) -> str | None:
    try:
        manifest.parse(doc)
    except manifest.ManifestError as exc:
        return str(exc)
    return None


@examples(20)
@given(doc=manifests.documents())
def test_the_api_server_and_the_models_refuse_the_same_taskqueues(
        control_plane: ControlPlane, crd: None, namespace: str, doc: dict[str, Any]) -> None:
    doc = {**doc, "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
           "metadata": {"name": "fuzz"}}
    assume(isinstance(doc.get("spec"), dict) and _finite(doc))
    doc = json.loads(json.dumps(doc).replace("@REDIS@", "127.0.0.1:6379"))
    problem = _model_problem(doc)
    proc = control_plane.kubectl("create", "--dry-run=server", "-n", namespace, "-f", "-",
                                 "-o", "name", input=json.dumps(doc), check=False)
    if problem is not None and all(not line.startswith(DIFFERENCES)
                                   for line in problem.splitlines()):
        assert proc.returncode != 0, f"the API server accepted what the models refuse: {problem}"
    if proc.returncode != 0:
        assert problem is not None, f"the API server refused what the models take: {proc.stderr}"
