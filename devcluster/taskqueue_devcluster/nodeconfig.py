"""Pure builders for the real node's configuration: containerd, CNI, kubelet, the pause image.

No I/O except `pause_image_tar`, which writes one tarball. `taskqueue_devcluster.node` writes these
files and starts the processes. Choices forced by machines of this kind (Debian containerd 1.6,
runc, a kernel with hybrid cgroup v1 mounts, no registry reachable) are explained where they are
made.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PAUSE_IMAGE = "localhost/taskqueue-pause:1"
CNI_BRIDGE = "tqnode0"
POD_SUBNET = "10.244.0.0/24"
POD_GATEWAY = "10.244.0.1"
#: The `kube-dns` Service's ClusterIP (kube-system), the pods' nameserver: CoreDNS behind it.
DNS_SERVICE_IP = "10.0.0.10"
CLUSTER_DOMAIN = "cluster.local"


def containerd_config(*, root: Path, state: Path, socket: Path, cni_conf_dir: Path,
                      cni_bin_dir: str = "/usr/lib/cni") -> str:
    """containerd 1.6/1.7 `config.toml` (version 2): its own root, state and socket, CRI with runc.

    `SystemdCgroup = false`: the kubelet runs with the cgroupfs driver (no systemd here). The
    sandbox image is the locally built pause image: nothing can be pulled from a registry.
    """
    return f"""version = 2
root = "{root}"
state = "{state}"

[grpc]
  address = "{socket}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  enable_unprivileged_ports = false
  restrict_oom_score_adj = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "{cni_bin_dir}"
  conf_dir = "{cni_conf_dir}"
"""


def cni_conflist() -> dict[str, Any]:
    """One bridge with host-local addresses; no masquerade (pods only talk to this machine)."""
    return {
        "cniVersion": "1.0.0",
        "name": "taskqueue-node",
        "plugins": [
            {
                "type": "bridge", "bridge": CNI_BRIDGE, "isGateway": True, "ipMasq": False,
                "hairpinMode": True,
                "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET,
                                                             "gateway": POD_GATEWAY}]],
                         "routes": [{"dst": "0.0.0.0/0"}]},
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(*, ca_file: Path, runtime_socket: Path, port: int,
                   healthz_port: int) -> dict[str, Any]:
    """KubeletConfiguration for one test node.

    `failCgroupV1: false` and `cgroupDriver: cgroupfs`: the kernel mounts cgroup v1 (hybrid) and
    containerd 1.x does not answer the RuntimeConfig RPC, so the kubelet falls back to this driver
    (the fallback exists up to Kubernetes 1.37). Eviction thresholds are near zero so a full test
    disk does not taint the node; image GC never runs (the images cannot be pulled again).
    """
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "127.0.0.1",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(ca_file)}},
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{runtime_socket}",
        "clusterDomain": CLUSTER_DOMAIN,
        "clusterDNS": [DNS_SERVICE_IP],
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "syncFrequency": "5s",
        "nodeStatusUpdateFrequency": "5s",
        "fileCheckFrequency": "5s",
        "maxPods": 110,
        "resolvConf": "/etc/resolv.conf",
        "protectKernelDefaults": False,
        "makeIPTablesUtilChains": False,
        "localStorageCapacityIsolation": False,
    }


def kube_proxy_config(*, kubeconfig: Path, node_name: str, healthz_port: int,
                      metrics_port: int) -> dict[str, Any]:
    """KubeProxyConfiguration: iptables mode, Services routed for the pod subnet as in any cluster.

    `clusterCIDR` is the pod subnet (traffic from outside it to a ClusterIP is masqueraded, so
    replies come back through this node); conntrack limits are left as the kernel has them
    (`maxPerCore: 0`: the sandbox may refuse to change them); health and metrics listen on
    loopback only and NodePorts are not opened on 127.0.0.1 (`localhostNodePorts: false`).
    """
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node_name,
        "bindAddress": POD_GATEWAY,  # the node's IP, as the kubelet registers it (--node-ip)
        "mode": "iptables",
        "clusterCIDR": POD_SUBNET,
        "healthzBindAddress": f"127.0.0.1:{healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{metrics_port}",
        "conntrack": {"maxPerCore": 0, "min": 0},
        "iptables": {"localhostNodePorts": False, "syncPeriod": "10s", "minSyncPeriod": "0s"},
        "nodePortAddresses": [f"{POD_GATEWAY}/32"],
    }


def corefile(*, kubeconfig: Path, port: int, health_port: int, ready_port: int) -> str:
    """CoreDNS's Corefile: the cluster's names from the API server, the rest from the host's
    resolver; on 127.0.0.1 only (pods reach it at `DNS_SERVICE_IP`:53 through `nat_rules`)."""
    return f""".:{port} {{
    bind 127.0.0.1
    errors
    health 127.0.0.1:{health_port}
    ready 127.0.0.1:{ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
    forward . /etc/resolv.conf
}}
"""


def dns_service() -> dict[str, Any]:
    """The `kube-dns` Service pods' resolv.conf points at (no selector: CoreDNS runs on the host
    and is reached through `nat_rules`, as the API server is behind `kubernetes`)."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
                     "labels": {"k8s-app": "kube-dns"}},
        "spec": {"clusterIP": DNS_SERVICE_IP,
                 "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                           {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]},
    }


def nat_rules(*, chain: str, apiserver_port: int, dns_port: int,
              service_ip: str = "10.0.0.1") -> list[list[str]]:
    """iptables (table nat) rules for what runs on this machine's loopback, beside kube-proxy.

    Pods reach the API server through the `kubernetes` Service IP (in-cluster config; the API
    server advertises 127.0.0.1, which no endpoint may be, so kube-proxy has none to route to) and
    any loopback-only service of this machine (the test's redis-server) through the bridge gateway:
    both are DNATed to 127.0.0.1, which the kernel routes only with `route_localnet=1`; so is the
    cluster DNS (`kube-dns`, `DNS_SERVICE_IP`:53, UDP and TCP) to CoreDNS's port. The same
    chain hooked on OUTPUT lets the API server reach the kubelet (serving on 127.0.0.1) at the
    node's InternalIP, for `kubectl logs/exec` and `helm test --logs`.
    """
    return [
        ["-N", chain],
        ["-A", chain, "-d", f"{service_ip}/32", "-p", "tcp", "--dport", "443",
         "-j", "DNAT", "--to-destination", f"127.0.0.1:{apiserver_port}"],
        *(["-A", chain, "-d", f"{DNS_SERVICE_IP}/32", "-p", proto, "--dport", "53",
           "-j", "DNAT", "--to-destination", f"127.0.0.1:{dns_port}"] for proto in ("udp", "tcp")),
        ["-A", chain, "-d", f"{POD_GATEWAY}/32", "-p", "tcp",
         "-j", "DNAT", "--to-destination", "127.0.0.1"],
        ["-I", "PREROUTING", "-i", CNI_BRIDGE, "-j", chain],
        ["-I", "OUTPUT", "-d", f"{POD_GATEWAY}/32", "-p", "tcp", "-j", chain],
    ]


def nat_cleanup(chain: str) -> list[list[str]]:
    """The rules undoing `nat_rules` (each may fail harmlessly if already gone)."""
    return [["-D", "PREROUTING", "-i", CNI_BRIDGE, "-j", chain],
            ["-D", "OUTPUT", "-d", f"{POD_GATEWAY}/32", "-p", "tcp", "-j", chain],
            ["-F", chain], ["-X", chain]]


def _tar_bytes(files: Mapping[str, tuple[bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, (data, mode) in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def pause_image_tar(pause_binary: Path, out: Path, *, name: str = PAUSE_IMAGE) -> Path:
    """Write a docker-archive (`ctr images import` reads it) holding `/pause` as the entrypoint."""
    layer = _tar_bytes({"pause": (pause_binary.read_bytes(), 0o755)})
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Entrypoint": ["/pause"], "User": "65535:65535"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [name],
                            "Layers": ["layer.tar"]}]).encode()
    out.write_bytes(_tar_bytes({config_name: (config, 0o644), "layer.tar": (layer, 0o644),
                                "manifest.json": (manifest, 0o644)}))
    return out
