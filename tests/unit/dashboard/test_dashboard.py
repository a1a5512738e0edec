"""The Grafana dashboard in the chart is valid and queries only metrics the code exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.metrics import MetricWrapperBase

from taskqueue.telemetry import metrics

DASHBOARD = (Path(__file__).resolve().parents[3] / "charts" / "taskqueue-operator" /
             "dashboards" / "taskqueue.json")
METRIC_NAME = re.compile(r"\btaskqueue_[a-z0-9_]+\b")
SERIES_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
                   "gauge": ("",)}


def _families() -> dict[str, tuple[str, ...]]:
    """Metric family -> the series names Prometheus scrapes, from the prometheus_client objects
    and the worker's per-task collector."""
    families = [*metrics.WORKER_TASKS.describe()]
    for obj in vars(metrics).values():
        if isinstance(obj, MetricWrapperBase):
            families += obj.describe()
    return {f.name: tuple(f.name + s for s in SERIES_SUFFIXES[f.type]) for f in families}


def _dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text("utf-8"))
    return doc


def _panels() -> list[dict[str, Any]]:
    return [p for p in _dashboard()["panels"] if p["type"] != "row"]


def _exprs() -> list[str]:
    return [t["expr"] for p in _panels() for t in p["targets"]]


def test_families_cover_the_contract() -> None:
    families = _families()
    assert "taskqueue_worker_tasks_started" in families
    assert families["taskqueue_redis_errors"] == ("taskqueue_redis_errors_total",)
    assert families["taskqueue_worker_task_duration_seconds"][0] == (
        "taskqueue_worker_task_duration_seconds_bucket")


def test_schema_version_variables_and_datasource() -> None:
    doc = _dashboard()
    assert doc["schemaVersion"] >= 36
    assert doc["uid"] == "taskqueue-operator"
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert (variables["datasource"]["type"], variables["datasource"]["query"]) == (
        "datasource", "prometheus")
    for name in ("namespace", "taskqueue", "queue"):
        assert variables[name]["type"] == "query"
        assert variables[name]["datasource"]["uid"] == "${datasource}"
    for p in _panels():
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]


def test_panel_ids_are_unique_and_panels_do_not_overlap() -> None:
    panels = _dashboard()["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"])
                for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine


@pytest.mark.parametrize("expr", _exprs())
def test_every_expr_names_only_exported_series(expr: str) -> None:
    exported = {s for series in _families().values() for s in series}
    names = set(METRIC_NAME.findall(expr))
    assert names, f"no taskqueue metric in {expr!r}"
    assert names <= exported, (
        f"{sorted(names - exported)} are not exported by taskqueue.telemetry.metrics")
    assert expr.count("(") == expr.count(")") and expr.count("{") == expr.count("}")


def test_histograms_are_read_through_buckets() -> None:
    for expr in _exprs():
        if "histogram_quantile" in expr:
            # an unlabelled histogram (the operator's poll lag) has no selector: `_bucket[`
            assert ("_bucket{" in expr or "_bucket[" in expr) and "by (le" in expr, expr


def test_every_exported_metric_appears_in_a_panel() -> None:
    used = {n for expr in _exprs() for n in METRIC_NAME.findall(expr)}
    unused = [f for f, series in _families().items() if not used & set(series)]
    assert unused == []


@pytest.mark.parametrize(
    "title",
    ["Backlog per queue", "In flight and delayed", "Replicas: desired vs actual",
     "Throughput (tasks/s)", "Pickup latency", "Handler duration", "Dead letters",
     "Redis errors"],
)
def test_the_panels_on_call_asks_for(title: str) -> None:
    assert title in {p["title"] for p in _panels()}


def test_the_observability_doc_lists_every_series() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "observability.md").read_text("utf-8")
    listed = set(re.findall(r"^\| `(taskqueue_[a-z0-9_]+)` \|", doc, flags=re.MULTILINE))
    expected = {series[0] if len(series) == 1 else name for name, series in _families().items()}
    assert listed == expected
