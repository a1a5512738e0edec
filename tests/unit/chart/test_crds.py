"""The chart's CRDs are the repository's generated crds/ (`scripts/sync-chart-crds --check`)."""

from __future__ import annotations

import subprocess

from tests.helpers.chart import CHART, REPO

REPO_CRDS = REPO / "crds"
CHART_CRDS = CHART / "files" / "crds"


def test_chart_crds_are_identical_to_the_generated_ones() -> None:
    proc = subprocess.run(
        [str(REPO / "scripts" / "sync-chart-crds"), "--check"], capture_output=True, text=True
    )
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}"
    assert sorted(p.name for p in REPO_CRDS.glob("*.yaml")) == sorted(
        p.name for p in CHART_CRDS.glob("*.yaml")
    )
