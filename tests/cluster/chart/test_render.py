"""`helm lint`, `helm template` of every scenario validated against the Kubernetes schemas, and
assertions on the rendered objects (security, RBAC, optional objects)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from taskqueue.api import manifest
from taskqueue.controller import workload
from tests.helpers.chart import (
    CHART,
    CI_VALUES,
    NAMESPACE,
    Render,
    by_kind,
    one,
    run_helm,
    template_args,
)

#: The chart's kubeVersion floor and the control plane's version: the schemas checked.
KUBE_VERSIONS = ("1.29.0", "1.37.0")
#: Kinds that are not part of Kubernetes (no schema to check them against).
FOREIGN_GROUPS = ("monitoring.coreos.com/",)

scenarios = pytest.mark.parametrize(
    "values", [(), *[(f,) for f in CI_VALUES]], ids=["no-values", *[f.stem for f in CI_VALUES]]
)


def test_helm_lint_strict_passes_for_every_scenario(helm: Path) -> None:
    for values in [None, *CI_VALUES]:
        args = ["lint", "--strict", str(CHART)] + (["-f", str(values)] if values else [])
        proc = run_helm(helm, *args, check=False)
        assert proc.returncode == 0, f"helm lint {values}:\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@scenarios
def test_rendered_objects_match_the_kubernetes_schemas(
    helm: Path, values: tuple[Path, ...], kube_version: str
) -> None:
    args = [*template_args(values), "--kube-version", kube_version]
    docs = [d for d in yaml.safe_load_all(run_helm(helm, *args).stdout) if d]
    assert docs
    for doc in docs:
        if doc["apiVersion"].startswith(FOREIGN_GROUPS):
            continue
        try:
            kubernetes_validate.validate(doc, kube_version, strict=True)
        except kubernetes_validate.ValidationError as e:
            name = f"{doc['kind']}/{doc['metadata']['name']}"
            pytest.fail(f"{name} is invalid for Kubernetes {kube_version}: {e.message} at {e.path}")


def test_kube_version_below_the_floor_is_refused(helm: Path) -> None:
    proc = run_helm(helm, *template_args(), "--kube-version", "1.28.0", check=False)
    assert proc.returncode != 0
    assert "kubeVersion" in proc.stderr or ">=1.29.0-0" in proc.stderr


@scenarios
def test_every_object_carries_the_standard_labels(render: Render, values: tuple[Path]) -> None:
    for obj in render(values, tests=True):
        labels = obj["metadata"].get("labels", {})
        for key in ("helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance"):
            assert key in labels, f"{obj['kind']}/{obj['metadata']['name']} lacks {key}"


# ------------------------------------------------------------------------------------ Deployment
def _container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The operator's container (the console, when enabled, is another Deployment)."""
    operator = [o for o in objs if o["metadata"].get("labels", {}).get(
        "app.kubernetes.io/component") != "console"]
    pod = one(operator, "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    return container


def test_operator_pod_is_locked_down_by_default(render: Render) -> None:
    objs = render()
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = _container(objs)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    resources = _container(objs)["resources"]
    assert resources["requests"] and resources["limits"]


def test_probes_and_ports_follow_the_operator_contract(render: Render) -> None:
    c = _container(render())
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"health": 8080, "metrics": 9090}
    for probe in (c["livenessProbe"], c["readinessProbe"]):
        assert probe["httpGet"] == {"path": "/healthz", "port": "health"}
    assert "--health-port=8080" in c["args"] and "--metrics-port=9090" in c["args"]
    env = {e["name"]: e.get("valueFrom") for e in c["env"]}
    assert env["POD_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_metrics_and_health_addresses_reach_the_operator(render: Render) -> None:
    from taskqueue.controller.main import parse_args

    default = parse_args(_container(render())["args"])
    assert (default.metrics_address, default.health_address) == ("0.0.0.0", "0.0.0.0")
    args = parse_args(_container(render(sets=["ports.metricsAddress=127.0.0.1"]))["args"])
    assert (args.metrics_address, args.health_address) == ("127.0.0.1", "0.0.0.0")


def test_worker_policy_renders_the_admission_policy_and_the_operator_flags(
    render: Render,
) -> None:
    from taskqueue.controller.main import parse_args

    plain = render()
    assert not [o for o in plain if o["kind"].startswith("ValidatingAdmissionPolicy")]
    assert parse_args(_container(plain)["args"]).worker_rules.image_prefixes == ()
    objs = render(sets=["workerPolicy.allowedImagePrefixes={r.example/a/,r.example/b/}",
                        "workerPolicy.scaleTargetLabel=taskqueue.dev/scalable=true",
                        "watchNamespaces={x,y}"])
    policy = one(objs, "ValidatingAdmissionPolicy")
    rule = policy["spec"]["validations"][0]["expression"]
    assert '["r.example/a/","r.example/b/"].exists(p, variables.image.startsWith(p))' in rule
    binding = one(objs, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    [selector] = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert selector["values"] == ["x", "y"]
    rules = parse_args(_container(objs)["args"]).worker_rules
    assert rules.image_prefixes == ("r.example/a/", "r.example/b/")
    assert rules.scale_target_label == ("taskqueue.dev/scalable", "true")
    wide = render(sets=["workerPolicy.allowedImagePrefixes={r.example/a/}", "clusterWide=true"])
    assert "matchResources" not in one(wide, "ValidatingAdmissionPolicyBinding")["spec"]


def test_args_watch_the_release_namespace_by_default(render: Render) -> None:
    args = _container(render())["args"]
    assert f"--namespace={NAMESPACE}" in args and "--all-namespaces" not in args
    assert "--leader-election-namespace=$(POD_NAMESPACE)" in args
    assert "--leader-election-id=taskqueue-operator" in args


def test_args_in_cluster_and_multi_namespace_modes(render: Render) -> None:
    assert "--all-namespaces" in _container(render(sets=["clusterWide=true"]))["args"]
    args = _container(render(sets=["watchNamespaces={a,b}", "extraArgs={--x=1}"]))["args"]
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=a", "--namespace=b"]
    assert args[-1] == "--x=1"


@scenarios
def test_rendered_args_parse_with_the_operator_cli(render: Render, values: tuple[Path]) -> None:
    """The chart's flags are the ones `taskqueue-operator` accepts (docs/contracts.md)."""
    from taskqueue.controller.main import parse_args

    args = parse_args(_container(render(values))["args"])
    assert (args.health_port, args.metrics_port) == (8080, 9090)
    assert args.leader_election_namespace == "$(POD_NAMESPACE)"  # expanded by the kubelet
    assert args.all_namespaces or args.namespace


def test_scheduling_values_reach_the_pod(render: Render) -> None:
    ha = CHART / "ci" / "ha-values.yaml"
    objs = render([ha])
    deploy = one(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"][0]["key"] == "dedicated"
    assert "podAntiAffinity" in pod["affinity"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert _container(objs)["image"].endswith("@sha256:" + "0" * 64)
    assert deploy["spec"]["template"]["metadata"]["labels"]["example.com/tier"] == "control"
    assert one(objs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert "--leader-election-id=taskqueue-operator-ha" in _container(objs)["args"]


def test_leader_election_off_uses_recreate_and_no_lease_rbac(render: Render) -> None:
    objs = render(sets=["leaderElection.enabled=false"])
    assert one(objs, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}
    assert "--no-leader-election" in _container(objs)["args"]
    assert not any(r["resources"] == ["leases"] for role in by_kind(objs, "Role")
                   for r in role["rules"])


def test_replica_count_zero_keeps_crd_and_rbac(render: Render) -> None:
    objs = render(sets=["replicaCount=0"])
    assert one(objs, "Deployment")["spec"]["replicas"] == 0
    assert by_kind(objs, "CustomResourceDefinition") and by_kind(objs, "Role")


def test_names_are_truncated_to_63_characters(render: Render) -> None:
    objs = render(
        sets=[f"fullnameOverride={'x' * 63}", "clusterWide=true"], namespace="n" * 63, tests=True
    )
    for obj in objs:
        if obj["kind"] != "CustomResourceDefinition":
            assert len(obj["metadata"]["name"]) <= 63, obj["metadata"]["name"]
    assert len({o["metadata"]["name"] for o in by_kind(objs, "ClusterRole")}) == 2


# ------------------------------------------------------------------------------ optional objects
def test_service_monitor_and_dashboard_absent_by_default(render: Render) -> None:
    objs = render()
    assert not by_kind(objs, "ServiceMonitor")
    assert not by_kind(objs, "ConfigMap")
    assert not by_kind(objs, "PodDisruptionBudget")


def test_service_monitor_selects_the_metrics_service(render: Render) -> None:
    objs = render([CHART / "ci" / "monitoring-values.yaml"])
    monitor = one(objs, "ServiceMonitor")
    service = one(objs, "Service")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_dashboard_configmap_follows_the_dashboard_file(render: Render) -> None:
    objs = render([CHART / "ci" / "monitoring-values.yaml"])
    configmaps = by_kind(objs, "ConfigMap")
    dashboard = CHART / "dashboards" / "taskqueue.json"
    if not dashboard.is_file():
        assert configmaps == []  # enabled, but no dashboard shipped: nothing rendered
        return
    [cm] = configmaps
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["data"]["taskqueue.json"].strip() == dashboard.read_text().strip()


def test_notes_tell_the_next_step(helm: Path) -> None:
    proc = run_helm(helm, "install", "taskqueue-operator", str(CHART), "-n", "taskqueue",
                    "--dry-run=client", "--set", "rbac.secretNames={redis-url}")
    notes = proc.stdout.split("NOTES:", 1)[1]
    assert "kubectl apply -n taskqueue -f examples/vip-normal.yaml" in notes
    assert "kubectl get taskqueues" in notes
    assert "kubectl describe taskqueue emails -n taskqueue " in notes
    assert "svc/taskqueue-operator-metrics" in notes
    assert "redis-url" in notes


def test_worker_pod_monitor_selects_the_pods_the_operator_creates(render: Render) -> None:
    assert not by_kind(render(), "PodMonitor")
    monitor = one(render([CHART / "ci" / "monitoring-values.yaml"]), "PodMonitor")
    tq = manifest.parse({
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": "emails", "namespace": "default", "uid": "u1"},
        "spec": {"redis": {"url": "redis://r:6379"}, "queues": [{"key": "q"}],
                 "worker": {"metricsPort": 9100}},
    })
    pod = workload.build_deployment(tq, uid="u1", replicas=1)["spec"]["template"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    assert ports == {monitor["spec"]["podMetricsEndpoints"][0]["port"]: 9100}


def test_sharding_values_reach_the_operator(render: Render) -> None:
    from taskqueue.controller.main import parse_args

    plain = parse_args(_container(render())["args"])
    assert not plain.sharding and not plain.no_leader_election
    args = parse_args(_container(render(sets=["sharding.enabled=true", "replicaCount=3",
                                              "sharding.leaseSeconds=20",
                                              "sharding.renewSeconds=4"]))["args"])
    assert (args.sharding, args.shard_lease_seconds, args.shard_renew_seconds) == (True, 20, 4)
    assert args.leader_election_id == "taskqueue-operator"
