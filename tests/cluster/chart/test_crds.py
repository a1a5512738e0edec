"""The chart's CRDs are the repository's generated crds/, upgraded by helm and kept on uninstall."""

from __future__ import annotations

import yaml

from tests.helpers.chart import Render, by_kind
from tests.unit.chart.test_crds import REPO_CRDS


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
