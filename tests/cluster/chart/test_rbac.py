"""The chart's RBAC: least privilege, commented, namespaced or cluster-wide (rendered only)."""

from __future__ import annotations

from typing import Any

from tests.helpers.chart import CHART, NAMESPACE, RELEASE, Render, by_kind, one

SA = f"{RELEASE}-taskqueue-operator"


def _rules(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for o in objs if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]]


def test_no_wildcards_anywhere(render: Render) -> None:
    for values in sorted((CHART / "ci").glob("*-values.yaml")):
        for rule in _rules(render([values])):
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(field, []), (values.name, rule)


def test_secrets_only_by_name_and_only_get(render: Render) -> None:
    assert not [r for r in _rules(render()) if "secrets" in r["resources"]]
    objs = render(sets=["rbac.secretNames={redis-url,other}"])
    secret_rules = [r for r in _rules(objs) if "secrets" in r["resources"]]
    assert secret_rules == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
         "resourceNames": ["redis-url", "other"]}
    ]


def test_namespaced_mode_uses_a_role_per_watched_namespace(render: Render) -> None:
    objs = render(sets=["watchNamespaces={team-a,team-b}"])
    roles = {(r["metadata"]["namespace"], r["metadata"]["name"]) for r in by_kind(objs, "Role")}
    assert roles == {
        ("team-a", SA), ("team-b", SA), (NAMESPACE, f"{SA}-leader-election")
    }
    bindings = by_kind(objs, "RoleBinding")
    assert {b["metadata"]["namespace"] for b in bindings} == {"team-a", "team-b", NAMESPACE}
    for b in bindings:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": SA, "namespace": NAMESPACE}]
    # the only cluster-wide grant: kopf's read-only observation of CRDs and namespaces
    [observer] = by_kind(objs, "ClusterRole")
    assert {(tuple(r["resources"]), tuple(r["verbs"])) for r in observer["rules"]} == {
        (("customresourcedefinitions",), ("list", "watch")),
        (("namespaces",), ("list", "watch")),
    }


def test_cluster_mode_uses_a_cluster_role(render: Render) -> None:
    objs = render(sets=["clusterWide=true"])
    assert [r["metadata"]["namespace"] for r in by_kind(objs, "Role")] == [NAMESPACE]  # the Lease
    cluster_roles = by_kind(objs, "ClusterRole")
    assert len(cluster_roles) == 2
    assert len(by_kind(objs, "ClusterRoleBinding")) == 2
    workload = next(c for c in cluster_roles if c["metadata"]["name"].endswith("-workload"))
    assert any("taskqueues" in r["resources"] for r in workload["rules"])


def test_rules_match_the_contract(render: Render) -> None:
    """docs/contracts.md, "API access it needs", verb for verb."""
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in _rules(render(sets=["rbac.secretNames={s}"])):
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == {
        ("taskqueue.dev", "taskqueues"): {"get", "list", "watch", "patch"},
        ("taskqueue.dev", "taskqueues/status"): {"get", "patch", "update"},
        ("apps", "deployments"): {"get", "list", "watch", "create", "patch", "update", "delete"},
        ("apps", "deployments/scale"): {"get", "patch", "update"},
        ("", "pods"): {"get", "list", "watch", "patch"},
        ("", "events"): {"create", "patch"},
        ("events.k8s.io", "events"): {"create", "patch"},
        ("coordination.k8s.io", "leases"): {"get", "create", "update"},
        ("", "secrets"): {"get"},
        ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
        ("", "namespaces"): {"list", "watch"},
    }


def test_sharding_adds_list_and_delete_of_leases_in_the_release_namespace_only(
        render: Render) -> None:
    objs = render(sets=["sharding.enabled=true", "replicaCount=3"])
    lease_rules = [(r["metadata"]["namespace"], set(rule["verbs"]))
                   for r in by_kind(objs, "Role") for rule in r["rules"]
                   if "leases" in rule["resources"]]
    assert lease_rules == [(NAMESPACE, {"get", "create", "update"}),
                           (NAMESPACE, {"list", "delete"})]
    args = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert {"--sharding", "--shard-lease-seconds=15", "--shard-renew-seconds=3"} <= set(args)
    unsharded = one(render(sets=["replicaCount=3"]), "Deployment")
    assert "--sharding" not in unsharded["spec"]["template"]["spec"]["containers"][0]["args"]


def test_rbac_create_false_renders_no_rbac(render: Render) -> None:
    objs = render(sets=["rbac.create=false"])
    kinds = {o["kind"] for o in objs}
    assert not kinds & {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
