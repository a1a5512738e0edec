"""Chart.yaml declares the chart's and the app's versions."""

from __future__ import annotations

import yaml

from tests.helpers.chart import CHART


def test_chart_yaml_declares_versions() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert (chart["apiVersion"], chart["kubeVersion"], chart["appVersion"]) == (
        "v2",
        ">=1.29.0-0",
        "0.1.0",
    )
