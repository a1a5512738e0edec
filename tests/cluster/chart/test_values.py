"""values.schema.json rejects what it must, readably, through helm."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.chart import run_helm, template_args


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("replicaCount=two", "/replicaCount"),
        ("replicaCount=-1", "/replicaCount"),
        ("unknownKey=1", "unknownKey"),
        ("rbac.secretNamez={a}", "secretNamez"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("watchNamespaces={Bad_Name}", "/watchNamespaces/0"),
        ("rbac.secretNames={UPPER}", "/rbac/secretNames/0"),
        ("ports.metrics=70000", "/ports/metrics"),
        ("serviceMonitor.interval=soon", "/serviceMonitor/interval"),
        ("image.digest=latest", "/image/digest"),
        ("clusterWide=yes please", "/clusterWide"),
        ("sharding.leaseSeconds=1", "/sharding/leaseSeconds"),
        ("sharding.enabled=maybe", "/sharding/enabled"),
    ],
)
def test_schema_rejects_a_bad_value_readably(helm: Path, setting: str, message: str) -> None:
    proc = run_helm(helm, *template_args(sets=[setting]), check=False)
    assert proc.returncode != 0, f"{setting} was accepted"
    assert "values don't meet the specifications of the schema" in proc.stderr
    assert message in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["clusterWide=true", "watchNamespaces={a}"], "clusterWide=true OR watchNamespaces"),
        (["replicaCount=2", "leaderElection.enabled=false"], "needs leaderElection.enabled"),
        (["sharding.enabled=true", "leaderElection.enabled=false"],
         "sharding.enabled needs leaderElection.enabled=true"),
        (["sharding.enabled=true", "sharding.renewSeconds=8"],
         "renewSeconds must be under half of sharding.leaseSeconds"),
    ],
)
def test_contradicting_values_fail_with_the_fix(
    helm: Path, settings: list[str], message: str
) -> None:
    proc = run_helm(helm, *template_args(sets=settings), check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
