"""The real node's pure configuration builders (taskqueue_devcluster.nodeconfig)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import tomllib
from pathlib import Path

import pytest

from taskqueue_devcluster import nodeconfig
from taskqueue_devcluster.node import missing_requirements


def test_containerd_config_is_private_and_uses_runc_with_cgroupfs(tmp_path: Path) -> None:
    conf = tomllib.loads(nodeconfig.containerd_config(
        root=tmp_path / "root", state=tmp_path / "state", socket=tmp_path / "c.sock",
        cni_conf_dir=tmp_path / "cni"))
    assert conf["version"] == 2
    assert (conf["root"], conf["state"]) == (str(tmp_path / "root"), str(tmp_path / "state"))
    assert conf["grpc"]["address"] == str(tmp_path / "c.sock")
    cri = conf["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == nodeconfig.PAUSE_IMAGE
    runc = cri["containerd"]["runtimes"]["runc"]
    assert runc["runtime_type"] == "io.containerd.runc.v2"
    assert runc["options"]["SystemdCgroup"] is False
    assert cri["cni"] == {"bin_dir": "/usr/lib/cni", "conf_dir": str(tmp_path / "cni")}


def test_cni_is_one_bridge_without_masquerade() -> None:
    conf = nodeconfig.cni_conflist()
    bridge = conf["plugins"][0]
    assert (bridge["type"], bridge["bridge"], bridge["ipMasq"]) == ("bridge", "tqnode0", False)
    [[rng]] = bridge["ipam"]["ranges"]
    assert rng == {"subnet": nodeconfig.POD_SUBNET, "gateway": nodeconfig.POD_GATEWAY}


@pytest.mark.parametrize("key, value", [
    pytest.param("failCgroupV1", False, id="hybrid-cgroup-v1-kernel"),
    pytest.param("cgroupDriver", "cgroupfs", id="no-systemd-containerd-1x-fallback"),
    pytest.param("failSwapOn", False, id="swap-tolerated"),
    pytest.param("readOnlyPort", 0, id="no-read-only-port"),
    pytest.param("address", "127.0.0.1", id="loopback-only"),
    pytest.param("imageGCHighThresholdPercent", 100, id="images-never-collected"),
])
def test_kubelet_config(tmp_path: Path, key: str, value: object) -> None:
    conf = nodeconfig.kubelet_config(ca_file=tmp_path / "ca.crt",
                                     runtime_socket=tmp_path / "c.sock", port=1, healthz_port=2)
    assert conf[key] == value
    assert conf["containerRuntimeEndpoint"] == f"unix://{tmp_path / 'c.sock'}"


def test_nat_rules_dnat_service_ip_and_gateway_to_loopback_and_cleanup_undoes_them() -> None:
    rules = nodeconfig.nat_rules(chain="TQ-X", apiserver_port=6443, dns_port=5353)
    assert rules[0] == ["-N", "TQ-X"]
    for proto in ("udp", "tcp"):
        assert ["-A", "TQ-X", "-d", "10.0.0.10/32", "-p", proto, "--dport", "53", "-j", "DNAT",
                "--to-destination", "127.0.0.1:5353"] in rules
    assert ["-A", "TQ-X", "-d", "10.0.0.1/32", "-p", "tcp", "--dport", "443", "-j", "DNAT",
            "--to-destination", "127.0.0.1:6443"] in rules
    assert ["-A", "TQ-X", "-d", "10.244.0.1/32", "-p", "tcp", "-j", "DNAT",
            "--to-destination", "127.0.0.1"] in rules
    hooks = [r for r in rules if r[0] == "-I"]
    assert ["-I", "PREROUTING", "-i", "tqnode0", "-j", "TQ-X"] in hooks
    assert ["-I", "OUTPUT", "-d", "10.244.0.1/32", "-p", "tcp", "-j", "TQ-X"] in hooks
    cleanup = nodeconfig.nat_cleanup("TQ-X")
    assert cleanup == [["-D", *h[1:]] for h in hooks] + [["-F", "TQ-X"], ["-X", "TQ-X"]]


@pytest.mark.parametrize("path, value", [
    pytest.param(("mode",), "iptables", id="iptables-mode"),
    pytest.param(("clusterCIDR",), nodeconfig.POD_SUBNET, id="pod-subnet-is-cluster-cidr"),
    pytest.param(("hostnameOverride",), "tq-node", id="node-name"),
    pytest.param(("healthzBindAddress",), "127.0.0.1:7", id="healthz-loopback"),
    pytest.param(("metricsBindAddress",), "127.0.0.1:8", id="metrics-loopback"),
    pytest.param(("conntrack", "maxPerCore"), 0, id="conntrack-limits-untouched"),
    pytest.param(("iptables", "localhostNodePorts"), False, id="no-nodeports-on-loopback"),
])
def test_kube_proxy_config(tmp_path: Path, path: tuple[str, ...], value: object) -> None:
    conf: object = nodeconfig.kube_proxy_config(kubeconfig=tmp_path / "k", node_name="tq-node",
                                                healthz_port=7, metrics_port=8)
    for key in path:
        assert isinstance(conf, dict)
        conf = conf[key]
    assert conf == value


def test_pause_image_tar_is_a_docker_archive(tmp_path: Path) -> None:
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF fake")
    out = nodeconfig.pause_image_tar(binary, tmp_path / "pause.tar")
    with tarfile.open(out) as tar:
        [manifest] = json.load(tar.extractfile("manifest.json"))  # type: ignore[arg-type]
        assert manifest["RepoTags"] == [nodeconfig.PAUSE_IMAGE]
        config = json.load(tar.extractfile(manifest["Config"]))  # type: ignore[arg-type]
        layer = tar.extractfile("layer.tar").read()  # type: ignore[union-attr]
    assert config["config"]["Entrypoint"] == ["/pause"]
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(layer).hexdigest()]
    with tarfile.open(fileobj=io.BytesIO(layer)) as inner:
        member = inner.getmember("pause")
        assert member.mode == 0o755
        assert inner.extractfile(member).read() == b"\x7fELF fake"  # type: ignore[union-attr]


def test_missing_requirements_name_the_build_command(tmp_path: Path) -> None:
    missing = missing_requirements(tmp_path, cni_bin_dir=str(tmp_path / "cni"))
    assert f"{tmp_path}/kubelet (scripts/control-plane build-node)" in missing
    assert any("containernetworking-plugins" in m for m in missing)


def test_corefile_serves_the_cluster_domain_on_loopback_from_the_api_server(tmp_path: Path,
                                                                          ) -> None:
    text = nodeconfig.corefile(kubeconfig=tmp_path / "k", port=5353, health_port=1, ready_port=2)
    assert text.startswith(".:5353 {")
    for line in ("bind 127.0.0.1", "health 127.0.0.1:1", "ready 127.0.0.1:2",
                 "kubernetes cluster.local in-addr.arpa ip6.arpa {",
                 f"kubeconfig {tmp_path / 'k'}", "forward . /etc/resolv.conf"):
        assert f"    {line}" in text or f"        {line}" in text, line
    assert text.count("{") == text.count("}")


def test_dns_service_is_the_pods_nameserver(tmp_path: Path) -> None:
    svc = nodeconfig.dns_service()
    assert (svc["metadata"]["namespace"], svc["metadata"]["name"]) == ("kube-system", "kube-dns")
    assert svc["spec"]["clusterIP"] == nodeconfig.DNS_SERVICE_IP
    assert "selector" not in svc["spec"]
    assert {(p["port"], p["protocol"]) for p in svc["spec"]["ports"]} == {(53, "UDP"), (53, "TCP")}
    conf = nodeconfig.kubelet_config(ca_file=tmp_path / "ca", runtime_socket=tmp_path / "s",
                                     port=1, healthz_port=2)
    assert conf["clusterDNS"] == [nodeconfig.DNS_SERVICE_IP]
    assert conf["clusterDomain"] == nodeconfig.CLUSTER_DOMAIN
