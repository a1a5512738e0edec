"""The CRD in crds/ is generated from the models, is structural, and defaults like pydantic does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from taskqueue.api import crdgen, models

ROOT = Path(__file__).resolve().parents[3]
CRD_FILE = ROOT / crdgen.OUTPUT


def nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}{{}}")


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """What the API server's defaulting does, for the parts of the schema we use."""
    if isinstance(value, dict) and "properties" in schema:
        out = dict(value)
        for name, sub in schema["properties"].items():
            if name not in out and "default" in sub:
                out[name] = sub["default"]
            if name in out:
                out[name] = apply_defaults(sub, out[name])
        return out
    if isinstance(value, list) and "items" in schema:
        return [apply_defaults(schema["items"], v) for v in value]
    return value


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    return crdgen.openapi_schema()


def test_crd_file_matches_the_models() -> None:
    assert CRD_FILE.read_text("utf-8") == crdgen.render(), (
        "crds/ is stale: run `python -m taskqueue.api.crdgen`"
    )


def test_check_mode_reports_drift(tmp_path: Path) -> None:
    stale = tmp_path / "crd.yaml"
    stale.write_text("old")
    assert crdgen.main(["--check", "--output", str(stale)]) == 1
    assert crdgen.main(["--output", str(stale)]) == 0
    assert crdgen.main(["--check", "--output", str(stale)]) == 0


def test_names_and_subresources() -> None:
    crd = yaml.safe_load(CRD_FILE.read_text("utf-8"))
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "taskqueues.taskqueue.dev"
    assert spec["names"]["shortNames"] == ["tq"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1" and version["storage"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Backlog": ".status.totalBacklog", "In-flight": ".status.inFlight",
        "Oldest": ".status.oldestTaskAgeSeconds",
        "Desired": ".status.desiredReplicas", "Replicas": ".status.replicas",
        "Paused": ".status.pausedQueues", "Next-Schedule": ".status.nextScheduleTime",
        "Reason": ".status.reason",
        "Age": ".metadata.creationTimestamp",
    }


@pytest.mark.parametrize("forbidden", ["$ref", "anyOf", "oneOf", "allOf", "title", "nullable",
                                       "$defs", "const"])
def test_schema_is_structural(schema: dict[str, Any], forbidden: str) -> None:
    for path, node in nodes(schema):
        assert forbidden not in node, f"{path} has {forbidden}"


def test_every_node_has_a_type(schema: dict[str, Any]) -> None:
    for path, node in nodes(schema):
        assert "type" in node, path
        assert not ("properties" in node and "additionalProperties" in node), path


@pytest.mark.parametrize("path", [
    ".spec.worker.env[]", ".spec.worker.envFrom[]", ".spec.worker.resources",
    ".spec.worker.tolerations[]",
])
def test_kubernetes_objects_pass_through(schema: dict[str, Any], path: str) -> None:
    found = dict(nodes(schema))[path]
    assert found == {"type": "object", "x-kubernetes-preserve-unknown-fields": True} | (
        {"description": found["description"]} if "description" in found else {}
    )


@pytest.mark.parametrize("path, rule_part", [
    (".spec.redis", "has(self.url) != has(self.urlSecretRef)"),
    (".spec.worker", "has(self.handler) && has(self.command)"),
    (".spec.scaling", "self.minReplicas <= self.maxReplicas"),
    (".spec.history", "self.retentionSeconds <= self.intervalSeconds * 100000.0"),
    (".spec", "exists_one"),
])
def test_cel_rules_where_pydantic_validates(
    schema: dict[str, Any], path: str, rule_part: str
) -> None:
    rules = dict(nodes(schema))[path]["x-kubernetes-validations"]
    assert any(rule_part in r["rule"] for r in rules)
    assert all(r["message"] for r in rules)


def test_defaults_match_pydantic(schema: dict[str, Any]) -> None:
    minimal = {"redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "jobs"}]}
    defaulted = apply_defaults(schema["properties"]["spec"], minimal)
    from_model = models.TaskQueueSpec.model_validate(minimal).model_dump(
        exclude_none=True, exclude_defaults=False
    )
    # pydantic keeps empty lists; the CRD leaves them out
    from_model["worker"] = {k: v for k, v in from_model["worker"].items() if v != []}
    from_model = {k: v for k, v in from_model.items() if v != []}
    assert defaulted == from_model


def test_defaulted_manifest_round_trips_through_the_models(schema: dict[str, Any]) -> None:
    minimal = {"redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "a"}, {"key": "b"}]}
    spec = models.TaskQueueSpec.model_validate(apply_defaults(schema["properties"]["spec"],
                                                              minimal))
    assert spec.scaling.pollIntervalSeconds == 2
    assert [q.type for q in spec.queues] == ["list", "list"]
