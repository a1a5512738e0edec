"""The chart's CRDs are the repository's generated crds/, upgraded by helm and kept on uninstall."""

from __future__ import annotations

import subprocess

import yaml

from tests.helpers.chart import CHART, REPO, Render, by_kind

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


def test_rendered_crd_is_the_generated_one_plus_keep_policy(render: Render) -> None:
    rendered = {c["metadata"]["name"]: c for c in by_kind(render(), "CustomResourceDefinition")}
    generated = [yaml.safe_load(p.read_text()) for p in sorted(REPO_CRDS.glob("*.yaml"))]
    assert sorted(rendered) == sorted(c["metadata"]["name"] for c in generated)
    for crd in generated:
        out = rendered[crd["metadata"]["name"]]
        assert out["spec"] == crd["spec"]
        assert out["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert out["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"


def test_crds_install_false_leaves_them_out(render: Render) -> None:
    assert by_kind(render(sets=["crds.install=false"]), "CustomResourceDefinition") == []
