"""A real node for the test cluster: containerd + runc + CNI bridge, kubelet and kube-scheduler.

`RealNode(control_plane)` starts, in its own state directory and on its own socket:

- **containerd** (the Debian package, 1.6/1.7) with the CRI plugin, runc and the CNI plugins from
  `containernetworking-plugins` (a bridge `tqnode0`, pods in 10.244.0.0/24; the node's IP is the
  bridge's 10.244.0.1, as the kubelet refuses a loopback node IP);
- the locally built **pause** image as the sandbox image (no registry can be pulled from here);
- **kube-scheduler** and **kubelet** built by ``scripts/control-plane build-node`` from the same
  Kubernetes version as the API server (cgroupfs driver, `failCgroupV1: false`);
- **kube-proxy** (iptables mode) from the same build: Services route to their pods as in any
  cluster (ClusterIPs, the `<SVC>_SERVICE_HOST/PORT` variables the kubelet injects);
- **CoreDNS** (the `kube-dns` Service, 10.0.0.10, the pods' nameserver) on 127.0.0.1;
- iptables NAT rules for what lives on this machine's loopback: the `kubernetes` Service IP
  (10.0.0.1:443, the operator pod's in-cluster config; the API server advertises 127.0.0.1, which
  no endpoint may be), the `kube-dns` Service IP (to CoreDNS) and the bridge gateway
  10.244.0.1:<port> (e.g. the test's redis-server) are DNATed to 127.0.0.1.

Images are loaded with `ctr -n k8s.io images import` (`load_image`). Pods then run for real: the
kubelet pulls nothing, starts the containers with their security context, sends SIGTERM on deletion
and SIGKILL after the grace period, restarts crashed containers. Requires root.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from types import TracebackType

from taskqueue_devcluster import nodeconfig
from taskqueue_devcluster.controlplane import (
    DEFAULT_CONTROLLERS,
    ControlPlane,
    ControlPlaneError,
    _Process,
    free_port,
    terminate_process_group,
)

NODE_BUILD_COMMAND = "scripts/control-plane build-node"
NODE_BINARIES = ("kubelet", "kube-scheduler", "kube-proxy", "coredns", "pause")
HOST_TOOLS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables")
NODE_NAME = "tq-node"
CNI_STATE_DIR = "/var/lib/cni/networks"
#: The control plane's controllers for a real node: EndpointSlices are what kube-proxy routes by.
NODE_CONTROLLERS = (*DEFAULT_CONTROLLERS, "endpointslice-controller")


def _cni_netns() -> set[str]:
    """containerd's pod network namespaces (`cni-<uuid>` in /var/run/netns)."""
    with contextlib.suppress(OSError):
        return {n for n in os.listdir("/var/run/netns") if n.startswith("cni-")}
    return set()


def _http_ok(port: int, path: str) -> bool:
    with contextlib.suppress(OSError), \
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as resp:
        return bool(resp.status == 200)
    return False


class NodeError(ControlPlaneError):
    """The real node could not be started, or a node command failed."""


def missing_requirements(bin_dir: Path, cni_bin_dir: str = "/usr/lib/cni") -> list[str]:
    """What this machine lacks to run a real node (empty when it can)."""
    missing = [f"{bin_dir}/{b} ({NODE_BUILD_COMMAND})" for b in NODE_BINARIES
               if not (bin_dir / b).is_file()]
    missing += [f"{t} (apt-get install containerd runc iptables)" for t in HOST_TOOLS
                if shutil.which(t) is None]
    if not Path(cni_bin_dir, "bridge").is_file():
        missing.append(f"{cni_bin_dir}/bridge (apt-get install containernetworking-plugins)")
    if os.geteuid() != 0:
        missing.append("root (the kubelet and containerd need it)")
    return missing


class RealNode:
    """containerd + kubelet + kube-scheduler attached to a running `ControlPlane`."""

    def __init__(self, control_plane: ControlPlane, *, state_dir: Path | str | None = None,
                 startup_timeout: float = 120.0, cni_bin_dir: str = "/usr/lib/cni") -> None:
        self.cp = control_plane
        self.bin_dir = control_plane.bin_dir
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="taskqueue-node-")).resolve()
        self.startup_timeout = startup_timeout
        self.cni_bin_dir = cni_bin_dir
        self.socket = self.state_dir / "containerd.sock"
        self.name = NODE_NAME
        self.chain = f"TQNODE-{uuid.uuid4().hex[:6].upper()}"
        self._procs: list[_Process] = []
        self._nat = False
        self._netns_before: set[str] = set()
        self.dns_port = 0

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> RealNode:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> RealNode:
        missing = missing_requirements(self.bin_dir, self.cni_bin_dir)
        if missing:
            raise NodeError("cannot run a real node here, missing: " + "; ".join(missing))
        if "endpointslice-controller" not in self.cp.controllers:
            raise NodeError("the control plane runs no endpointslice-controller: Services "
                            "would route nowhere; start it with "
                            "ControlPlane(controllers=NODE_CONTROLLERS)")
        try:
            for sub in ("logs", "cni", "containerd/root", "containerd/state", "kubelet"):
                (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
            self._netns_before = _cni_netns()
            self._make_bridge()
            self._start_containerd()
            self.load_image(nodeconfig.pause_image_tar(self.bin_dir / "pause",
                                                       self.state_dir / "pause.tar"))
            self.dns_port = free_port()
            self._install_nat()
            self._start_scheduler()
            self._start_kubelet()
            self._start_kube_proxy()
            self._start_coredns()
            # The kubelet registers with this taint; the node-lifecycle controller (not run by
            # the harness) would lift it once the node is Ready.
            self.cp.kubectl("taint", "node", self.name, "node.kubernetes.io/not-ready:NoSchedule-",
                            check=False)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Remove every pod's containers, stop kubelet, scheduler and containerd, undo the NAT."""
        if any(p.name == "kubelet" and p.popen.poll() is None for p in self._procs):
            self._delete_all_pods()
        for proc in reversed(self._procs):
            if proc.name == "containerd":
                self._remove_all_containers()
            terminate_process_group(proc.popen, grace=10.0)
            proc.log_file.close()
        if self._procs:
            self._remove_kube_chains()
        self._procs.clear()
        if self._nat:
            for rule in nodeconfig.nat_cleanup(self.chain):
                subprocess.run(["iptables", "-t", "nat", *rule], capture_output=True, check=False)
            self._nat = False
        for mount in self.mounts():
            subprocess.run(["umount", "-l", mount], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", nodeconfig.CNI_BRIDGE], capture_output=True,
                       check=False)
        for netns in _cni_netns() - self._netns_before:  # sandboxes containerd had no time to GC
            subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)

    # ------------------------------------------------------------------ helpers for tests
    def ctr(self, *args: str, check: bool = True, timeout: float = 300.0,
            ) -> subprocess.CompletedProcess[str]:
        """`ctr --address <our socket> -n k8s.io ARGS`."""
        argv = ["ctr", "--address", str(self.socket), "-n", "k8s.io", *args]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise NodeError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def load_image(self, tar: Path) -> None:
        """Import a docker-archive / OCI tarball into containerd's k8s.io namespace."""
        self.ctr("images", "import", str(tar))

    def images(self) -> list[str]:
        return self.ctr("images", "list", "-q").stdout.split()

    def kill_container(self, container_id: str, signal: str = "SIGKILL") -> None:
        """Kill a container's task behind the kubelet's back (a crash, as far as it can tell)."""
        self.ctr("tasks", "kill", "--signal", signal, container_id.removeprefix("containerd://"))

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.state_dir / "logs" / f"{name}.log"
        with contextlib.suppress(OSError):
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    # ------------------------------------------------------------------ components
    def _spawn(self, name: str, argv: list[str]) -> _Process:
        log = self.state_dir / "logs" / f"{name}.log"
        log_file = log.open("ab")
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log_file,
                                 stderr=subprocess.STDOUT, start_new_session=True,
                                 cwd=self.state_dir)
        proc = _Process(name, popen, log, log_file)
        self._procs.append(proc)
        return proc

    def _wait(self, proc: _Process, what: str, ready: object) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise NodeError(f"{proc.name} exited with {proc.popen.returncode} while waiting "
                                f"for {what}:\n{self.log_tail(proc.name)}")
            if ready():  # type: ignore[operator]
                return
            time.sleep(0.3)
        raise NodeError(f"timed out after {self.startup_timeout}s waiting for {what}:\n"
                        + self.log_tail(proc.name))

    def _make_bridge(self) -> None:
        """The CNI bridge, made before the first pod: its gateway address is the node's IP (the
        kubelet refuses a loopback node IP); host-local's leases of an earlier run are dropped."""
        shutil.rmtree(Path(CNI_STATE_DIR, "taskqueue-node"), ignore_errors=True)
        bridge = nodeconfig.CNI_BRIDGE
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
        for argv in (["ip", "link", "add", bridge, "type", "bridge"],
                     ["ip", "addr", "add", f"{nodeconfig.POD_GATEWAY}/24", "dev", bridge],
                     ["ip", "link", "set", bridge, "up"]):
            proc = subprocess.run(argv, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise NodeError(f"{' '.join(argv)}: {proc.stderr.strip()}")

    def _start_containerd(self) -> None:
        conf_dir = self.state_dir / "cni"
        (conf_dir / "10-taskqueue.conflist").write_text(json.dumps(nodeconfig.cni_conflist()))
        config = self.state_dir / "containerd.toml"
        config.write_text(nodeconfig.containerd_config(
            root=self.state_dir / "containerd/root", state=self.state_dir / "containerd/state",
            socket=self.socket, cni_conf_dir=conf_dir, cni_bin_dir=self.cni_bin_dir))
        proc = self._spawn("containerd", ["containerd", "--config", str(config)])
        self._wait(proc, "containerd's socket",
                   lambda: self.socket.exists()
                   and self.ctr("version", check=False, timeout=10).returncode == 0)

    def _install_nat(self) -> None:
        # bridge-nf-call-iptables: a reply from a Service's pod to a pod on the same bridge must
        # pass conntrack to be un-DNATed (what kubeadm's preflight requires too).
        for key in ("net.ipv4.conf.all.route_localnet", "net.ipv4.ip_forward",
                    "net.bridge.bridge-nf-call-iptables"):
            subprocess.run(["sysctl", "-qw", f"{key}=1"], capture_output=True, check=False)
        self._nat = True
        for rule in nodeconfig.nat_rules(chain=self.chain, apiserver_port=self.cp.port,
                                         dns_port=self.dns_port):
            proc = subprocess.run(["iptables", "-t", "nat", *rule], capture_output=True,
                                  text=True, check=False)
            if proc.returncode != 0:
                raise NodeError(f"iptables -t nat {' '.join(rule)}: {proc.stderr.strip()}")

    def _start_scheduler(self) -> None:
        self._spawn("kube-scheduler", [
            str(self.bin_dir / "kube-scheduler"), f"--kubeconfig={self.cp.kubeconfig}",
            "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0", "--v=1"])

    def _start_kubelet(self) -> None:
        config = self.state_dir / "kubelet.yaml"
        config.write_text(json.dumps(nodeconfig.kubelet_config(
            ca_file=self.cp.ca_cert, runtime_socket=self.socket, port=free_port(),
            healthz_port=free_port())))
        proc = self._spawn("kubelet", [
            str(self.bin_dir / "kubelet"), f"--config={config}",
            f"--kubeconfig={self.cp.kubeconfig}", f"--root-dir={self.state_dir / 'kubelet'}",
            f"--hostname-override={self.name}", f"--node-ip={nodeconfig.POD_GATEWAY}", "--v=1"])
        self._wait(proc, f"node {self.name} Ready", self._node_ready)

    def _start_kube_proxy(self) -> None:
        config = self.state_dir / "kube-proxy.yaml"
        healthz = free_port()
        config.write_text(json.dumps(nodeconfig.kube_proxy_config(
            kubeconfig=Path(self.cp.kubeconfig), node_name=self.name, healthz_port=healthz,
            metrics_port=free_port())))
        proc = self._spawn("kube-proxy", [str(self.bin_dir / "kube-proxy"), f"--config={config}",
                                          "--v=1"])
        self._wait(proc, "kube-proxy's first sync", lambda: _http_ok(healthz, "/healthz"))

    def _start_coredns(self) -> None:
        self.cp.kubectl("apply", "-f", "-", input=json.dumps(nodeconfig.dns_service()))
        corefile = self.state_dir / "Corefile"
        ready = free_port()
        corefile.write_text(nodeconfig.corefile(kubeconfig=Path(self.cp.kubeconfig),
                                                port=self.dns_port, health_port=free_port(),
                                                ready_port=ready))
        proc = self._spawn("coredns", [str(self.bin_dir / "coredns"), "-conf", str(corefile)])
        self._wait(proc, "CoreDNS ready", lambda: _http_ok(ready, "/ready"))

    def _node_ready(self) -> bool:
        try:
            node = self.cp.get_json(f"/api/v1/nodes/{self.name}")
        except OSError:
            return False
        conditions = node.get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    # ------------------------------------------------------------------ teardown
    def _delete_all_pods(self) -> None:
        """Force-delete every pod and give the kubelet a moment to tear the sandboxes down (CNI
        DEL releases the addresses and veths)."""
        self.cp.kubectl("delete", "pods", "--all", "-A", "--force", "--grace-period=0",
                        "--wait=false", check=False)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not self.ctr("tasks", "list", "-q", check=False, timeout=30).stdout.split():
                return
            time.sleep(0.5)

    def _remove_all_containers(self) -> None:
        """Kill every task in k8s.io so no container outlives the test run."""
        proc = self.ctr("tasks", "list", "-q", check=False, timeout=30)
        for task in proc.stdout.split():
            self.ctr("tasks", "kill", "--signal", "SIGKILL", task, check=False, timeout=30)

    def _remove_kube_chains(self) -> None:
        """kube-proxy's chains (KUBE-*) are the machine's: remove them with the node, and the
        KUBE-FIREWALL hooks left behind when that chain is empty."""
        subprocess.run([str(self.bin_dir / "kube-proxy"), "--cleanup"], capture_output=True,
                       check=False, timeout=60)
        rules = subprocess.run(["iptables", "-S", "KUBE-FIREWALL"], capture_output=True,
                               text=True, check=False).stdout.split("\n")
        if [r for r in rules if r.strip()] == ["-N KUBE-FIREWALL"]:
            for args in (["-D", "INPUT", "-j", "KUBE-FIREWALL"],
                         ["-D", "OUTPUT", "-j", "KUBE-FIREWALL"], ["-X", "KUBE-FIREWALL"]):
                subprocess.run(["iptables", *args], capture_output=True, check=False)

    def mounts(self) -> list[str]:
        """Mount points under the state directory, deepest first."""
        prefix = str(self.state_dir) + "/"
        with contextlib.suppress(OSError):
            lines = Path("/proc/self/mounts").read_text().splitlines()
            mounts = [line.split()[1] for line in lines]
            return sorted((m for m in mounts if m.startswith(prefix)), reverse=True)
        return []
