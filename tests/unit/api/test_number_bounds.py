"""Every number of a TaskQueue spec is bounded to what the code can use: finite, with a sane
maximum, refused with a message that states the range, and bounded the same way in the CRD.

The fields are found by walking the models, so a number added later without bounds fails here.
"""

from __future__ import annotations

import math
import threading
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import annotated_types
import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from taskqueue.api import crdgen, limits, manifest, models
from taskqueue.api.statusschema import SpecModel


@dataclass(frozen=True)
class NumberField:
    path: tuple[str, ...]
    """Field names from spec down; a mapping of numbers (queue key -> seconds) ends in "*"."""
    kind: type
    low: float
    low_open: bool
    high: float

    @property
    def name(self) -> str:
        return ".".join(self.path)


def _bounds(annotation: Any, metadata: list[Any]) -> tuple[type, list[Any], bool] | None:
    """(int or float, bounds, inside a mapping) of a number field, else None."""
    if annotation in (int, float):
        return annotation, metadata, False
    if typing.get_origin(annotation) is typing.Annotated:
        inner, *extra = typing.get_args(annotation)
        found = [m for e in extra for m in (e.metadata if isinstance(e, FieldInfo) else [e])]
        return _bounds(inner, [*metadata, *found])
    mapping = typing.get_origin(annotation) is dict
    for arg in typing.get_args(annotation)[1:] if mapping else typing.get_args(annotation):
        found_ = _bounds(arg, metadata)
        if found_ is not None:
            return found_[0], found_[1], mapping or found_[2]
    return None


def _models(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, SpecModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _models(arg)


def number_fields(model: type[BaseModel], path: tuple[str, ...] = ()) -> Iterator[NumberField]:
    for name, info in model.model_fields.items():
        found = _bounds(info.annotation, list(info.metadata))
        if found is not None:
            kind, metadata, mapping = found
            low = next((m for m in metadata
                        if isinstance(m, annotated_types.Ge | annotated_types.Gt)), None)
            high = next((m.le for m in metadata if isinstance(m, annotated_types.Le)), math.inf)
            yield NumberField(
                path=(*path, name, *(["*"] if mapping else [])), kind=kind,
                low=-math.inf if low is None else float(getattr(low, "ge", getattr(low, "gt", 0))),
                low_open=isinstance(low, annotated_types.Gt), high=float(high))
        for sub in _models(info.annotation):
            yield from number_fields(sub, (*path, name))


FIELDS = list(number_fields(models.TaskQueueSpec))


def test_the_walk_finds_the_numbers_of_every_section() -> None:
    names = {f.name for f in FIELDS}
    assert {"worker.terminationGracePeriodSeconds", "worker.taskTimeoutSeconds",
            "worker.idempotency.windowSeconds", "retry.backoffSeconds", "scaling.maxReplicas",
            "scaling.targetWaitSeconds.*", "queues.starvationLimit",
            "redis.waitForReplicas"} <= names


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_every_number_has_finite_bounds(field: NumberField) -> None:
    assert math.isfinite(field.low) and math.isfinite(field.high), field


REQUIRED: dict[str, dict[str, Any]] = {"rateLimit": {"tasks": 1}}
"""The required fields of a section, given so that the number under test is the one wrong."""


def manifest_with(field: NumberField, value: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "q"}]}
    node = spec
    *parents, leaf = field.path if field.path[-1] != "*" else field.path[:-1]
    for part in parents:
        if part == "queues":
            node = spec["queues"][0]
            continue
        if part == "schedules":  # a list too: its one item
            spec["schedules"] = [{"name": "s", "cron": "* * * * *", "queue": "q"}]
            node = spec["schedules"][0]
            continue
        node = node.setdefault(part, dict(REQUIRED.get(part, {})))
    node[leaf] = {"q": value} if field.path[-1] == "*" else value
    return {"kind": "TaskQueue", "spec": spec}


def out_of_range(field: NumberField) -> list[Any]:
    """Values of the field's own type outside its bounds, and the non-finite ones."""
    below = field.low if field.low_open else field.low - (1 if field.kind is int else 0.5)
    above = field.high + 1 if field.kind is int else field.high * 1.5
    values: list[Any] = [v for v in (below, above) if math.isfinite(v)] + [10**30, -(10**30)]
    if field.kind is int:
        return [int(v) for v in values]
    return [*values, math.nan, math.inf, -math.inf, 1e300, 10**400]


CASES = [pytest.param(f, v, id=f"{f.name}={v!r}"[:80]) for f in FIELDS for v in out_of_range(f)]


@pytest.mark.parametrize("field, value", CASES)
def test_a_number_out_of_range_is_refused_stating_the_range(field: NumberField,
                                                             value: Any) -> None:
    with pytest.raises(manifest.ManifestError) as info:
        manifest.parse(manifest_with(field, value))
    message = str(info.value)
    assert "\n" not in message
    assert "is out of range; use " in message, message
    assert f"{field.high:g}" in message or str(int(field.high)) in message, message


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_the_bounds_themselves_are_accepted(field: NumberField) -> None:
    if not field.low_open:
        manifest.parse(manifest_with(field, field.kind(field.low)))
    if field.name != "scaling.minReplicas":  # minReplicas <= maxReplicas (10 by default)
        manifest.parse(manifest_with(field, field.kind(field.high)))


@pytest.mark.parametrize("value", ["5", True], ids=["string", "bool"])
@pytest.mark.parametrize("field", [f for f in FIELDS if f.kind is int], ids=lambda f: f.name)
def test_a_number_of_another_type_is_refused(field: NumberField, value: Any) -> None:
    with pytest.raises(manifest.ManifestError):
        manifest.parse(manifest_with(field, value))


@pytest.mark.parametrize("field", [f for f in FIELDS if "*" not in f.path and not any(
    f.path[-2:] == (section, name) for section, names in REQUIRED.items() for name in names)],
                         ids=lambda f: f.name)
def test_null_is_an_unset_number(field: NumberField) -> None:
    """As the API server prunes a null field before it validates (no field is nullable; a
    null value in a map of seconds stays refused)."""
    manifest.parse(manifest_with(field, None))


def crd_node(field: NumberField) -> dict[str, Any]:
    node = crdgen.openapi_schema()["properties"]["spec"]
    for part in field.path:
        if part == "*":
            node = node["additionalProperties"]
            continue
        node = node["properties"][part]
        if node.get("type") == "array":
            node = node["items"]
    return node


@pytest.mark.parametrize("field", FIELDS, ids=lambda f: f.name)
def test_the_crd_bounds_each_number_as_the_model_does(field: NumberField) -> None:
    node = crd_node(field)
    assert node["type"] == ("integer" if field.kind is int else "number")
    assert (node["minimum"], node["maximum"]) == (field.low, field.high)
    assert node.get("exclusiveMinimum", False) is field.low_open


def test_the_maxima_are_within_what_python_and_redis_can_use() -> None:
    assert limits.MAX_DURATION_SECONDS < threading.TIMEOUT_MAX  # Event.wait, Thread.join
    assert limits.MAX_WINDOW_SECONDS < threading.TIMEOUT_MAX
    # PX / scores in ms, as Lua's doubles compute them: exact below 2^53
    assert (limits.MAX_WINDOW_SECONDS + 2 * limits.MAX_DURATION_SECONDS) * 1000 < 2**53
    assert limits.MAX_REPLICAS < 2**31  # Deployment replicas are int32
