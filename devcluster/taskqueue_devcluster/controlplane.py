"""Start and stop a real local Kubernetes control plane: etcd, kube-apiserver, controller-manager.

Everything listens on 127.0.0.1 on random free ports and lives in one state directory (etcd data,
certificates, kubeconfigs, logs). The API server runs with RBAC, a generated CA, client-certificate
authentication and service-account token signing keys; the controller-manager runs the deployment,
replicaset, garbage-collector, namespace and service-account controllers. There is no scheduler and
no kubelet: see `taskqueue_devcluster.kubelet` for the stand-in that runs pods as local processes.

The binaries come from ``scripts/control-plane build`` (or ``TASKQUEUE_CONTROL_PLANE_BIN``).
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from taskqueue_devcluster.pki import CertificateAuthority, CertPair, write_service_account_keys

BIN_DIR_ENV = "TASKQUEUE_CONTROL_PLANE_BIN"
BUILD_COMMAND = "scripts/control-plane build"
REQUIRED_BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl", "helm")
DEFAULT_CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
)
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
_REPO_ROOT = Path(__file__).resolve().parents[2]


class ControlPlaneError(RuntimeError):
    """The control plane could not be started or a command against it failed."""


class BinariesNotBuiltError(ControlPlaneError):
    """The control-plane binaries are not built yet."""


class CommandError(ControlPlaneError):
    """A kubectl/helm command exited non-zero."""

    def __init__(self, argv: Sequence[str], returncode: int, stdout: str, stderr: str) -> None:
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(
            f"{' '.join(self.argv)} exited {returncode}: {stderr.strip() or stdout.strip()}"
        )


def _control_plane_script() -> Path | None:
    candidates = [_REPO_ROOT, *Path.cwd().resolve().parents, Path.cwd().resolve()]
    for root in candidates:
        script = root / "scripts" / "control-plane"
        if script.is_file():
            return script
    return None


def find_bin_dir(*, build: bool = False) -> Path:
    """Return the directory holding the control-plane binaries.

    Uses ``$TASKQUEUE_CONTROL_PLANE_BIN`` if set, else ``scripts/control-plane bin-dir``
    (or ``build`` when `build` is true). Raises `BinariesNotBuiltError` when they are missing.
    """
    override = os.environ.get(BIN_DIR_ENV)
    if override:
        path = Path(override)
    else:
        script = _control_plane_script()
        if script is None:
            raise BinariesNotBuiltError(
                f"scripts/control-plane not found; set {BIN_DIR_ENV} to the binaries' directory"
            )
        proc = subprocess.run(
            [str(script), "build" if build else "bin-dir"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise BinariesNotBuiltError(
                f"control-plane binaries are not built: run `{BUILD_COMMAND}` "
                f"(takes ~20 minutes cold, cached afterwards). {proc.stderr.strip()}"
            )
        path = Path(proc.stdout.strip().splitlines()[-1])
    missing = [b for b in REQUIRED_BINARIES if not os.access(path / b, os.X_OK)]
    if missing:
        raise BinariesNotBuiltError(
            f"missing {', '.join(missing)} in {path}: run `{BUILD_COMMAND}`"
        )
    return path


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(
    path: Path, *, server: str, ca: Path, user: Mapping[str, str], name: str = "devcluster"
) -> Path:
    """Write a kubeconfig with one cluster/user/context; `user` is the kubeconfig user entry."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority-data": _b64(ca)}}
        ],
        "users": [{"name": name, "user": dict(user)}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


def _cert_user(pair: CertPair) -> dict[str, str]:
    return {"client-certificate-data": _b64(pair.cert), "client-key-data": _b64(pair.key)}


@dataclass
class _Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    log_file: IO[bytes]


def terminate_process_group(
    popen: subprocess.Popen[Any], *, grace: float = 10.0, sig: int = signal.SIGTERM
) -> None:
    """Send `sig` to the process group of `popen`, then SIGKILL it after `grace` seconds."""
    if popen.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, sig)
    try:
        popen.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(timeout=10)
    # Reap anything left in the group (children that outlived their parent).
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGKILL)


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager on loopback; a context manager.

    >>> with ControlPlane() as cp:
    ...     cp.kubectl("get", "namespaces")
    """

    def __init__(
        self,
        *,
        state_dir: Path | str | None = None,
        bin_dir: Path | str | None = None,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        startup_timeout: float = 120.0,
        use_service_account_credentials: bool = True,
    ) -> None:
        self.bin_dir = Path(bin_dir) if bin_dir is not None else find_bin_dir()
        self._own_state_dir = state_dir is None
        self.state_dir = Path(state_dir or tempfile.mkdtemp(prefix="taskqueue-cp-")).resolve()
        self.controllers = tuple(controllers)
        self.startup_timeout = startup_timeout
        self.use_service_account_credentials = use_service_account_credentials
        self.etcd_port = 0
        self.port = 0
        self.server = ""
        self.kubeconfig = self.state_dir / "admin.kubeconfig"
        self.ca_cert = self.state_dir / "pki" / "ca.crt"
        self._admin = CertPair(
            self.state_dir / "pki" / "admin.crt", self.state_dir / "pki" / "admin.key"
        )
        self._procs: list[_Process] = []
        self._started = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start etcd, the API server and the controller-manager; return when usable."""
        if self._started:
            return self
        self._started = True
        atexit.register(self.stop)
        try:
            self._prepare_state_dir()
            self._start_etcd()
            self._start_apiserver()
            self._start_controller_manager()
            self._wait_for_default_service_account()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop all processes (SIGTERM, then SIGKILL), newest first; remove a temp state dir."""
        atexit.unregister(self.stop)
        for proc in reversed(self._procs):
            terminate_process_group(proc.popen, grace=10.0)
            proc.log_file.close()
        self._procs.clear()
        self._started = False
        if self._own_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)

    @property
    def pids(self) -> dict[str, int]:
        """PIDs (= process-group ids) of the running components, by name."""
        return {p.name: p.popen.pid for p in self._procs}

    def _prepare_state_dir(self) -> None:
        if self.state_dir.exists() and not self._own_state_dir:
            for sub in ("etcd", "pki", "logs"):
                shutil.rmtree(self.state_dir / sub, ignore_errors=True)
        for sub in ("etcd", "pki", "logs"):
            (self.state_dir / sub).mkdir(parents=True, exist_ok=True)
        (self.state_dir / "etcd").chmod(0o700)
        self.port = free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        pki = self.state_dir / "pki"
        ca = CertificateAuthority(pki)
        self._serving = ca.issue(
            "apiserver",
            common_name="kube-apiserver",
            server_hosts=(
                "127.0.0.1",
                "localhost",
                "10.0.0.1",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
                "kubernetes.default.svc.cluster.local",
            ),
        )
        self._admin = ca.issue("admin", common_name="admin", organization="system:masters")
        kcm = ca.issue("controller-manager", common_name="system:kube-controller-manager")
        # What the API server shows a kubelet (logs, exec); kubelets trust this CA's clients.
        self._kubelet_client = ca.issue(
            "apiserver-kubelet-client",
            common_name="kube-apiserver-kubelet-client",
            organization="system:masters",
        )
        self._sa_keys = write_service_account_keys(pki)
        write_kubeconfig(
            self.kubeconfig, server=self.server, ca=ca.cert_path, user=_cert_user(self._admin)
        )
        self._kcm_kubeconfig = write_kubeconfig(
            self.state_dir / "controller-manager.kubeconfig",
            server=self.server,
            ca=ca.cert_path,
            user=_cert_user(kcm),
        )

    def _spawn(self, name: str, argv: Sequence[str]) -> _Process:
        log = self.state_dir / "logs" / f"{name}.log"
        log_file = log.open("ab")
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.state_dir,
        )
        proc = _Process(name, popen, log, log_file)
        self._procs.append(proc)
        return proc

    def _wait(self, proc: _Process, what: str, ready: Any) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise ControlPlaneError(
                    f"{proc.name} exited with {proc.popen.returncode} while waiting for {what}:\n"
                    + self._log_tail(proc)
                )
            if ready():
                return
            time.sleep(0.2)
        raise ControlPlaneError(
            f"timed out after {self.startup_timeout}s waiting for {what}:\n" + self._log_tail(proc)
        )

    @staticmethod
    def _log_tail(proc: _Process, lines: int = 30) -> str:
        try:
            text = proc.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    # ------------------------------------------------------------------ components
    def _start_etcd(self) -> None:
        self.etcd_port = free_port()
        peer_port = free_port()
        client_url = f"http://127.0.0.1:{self.etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        proc = self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=devcluster",
                f"--data-dir={self.state_dir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=devcluster={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait(proc, "etcd /health", lambda: self._http_ok(f"{client_url}/health"))

    def _start_apiserver(self) -> None:
        pki = self.state_dir / "pki"
        proc = self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                f"--secure-port={self.port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                # Loopback is not a valid endpoint of the `kubernetes` Service: do not reconcile it.
                "--endpoint-reconciler-type=none",
                # Reach a kubelet (logs, exec) at its node's InternalIP: node names do not resolve.
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={self._kubelet_client.cert}",
                f"--kubelet-client-key={self._kubelet_client.key}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={self._serving.cert}",
                f"--tls-private-key-file={self._serving.key}",
                f"--client-ca-file={self.ca_cert}",
                "--authorization-mode=RBAC",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={self._sa_keys.cert}",
                f"--service-account-signing-key-file={self._sa_keys.key}",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=1",
            ],
        )
        self._wait(proc, "kube-apiserver /readyz", lambda: self._api_ok("/readyz"))

    def _start_controller_manager(self) -> None:
        argv = [
            str(self.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={self._kcm_kubeconfig}",
            f"--controllers={','.join(self.controllers)}",
            f"--service-account-private-key-file={self._sa_keys.key}",
            f"--root-ca-file={self.ca_cert}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--v=1",
        ]
        if self.use_service_account_credentials:
            argv.append("--use-service-account-credentials=true")
        self._spawn("kube-controller-manager", argv)

    def _wait_for_default_service_account(self) -> None:
        kcm = next(p for p in self._procs if p.name == "kube-controller-manager")
        self._wait(
            kcm,
            "the default ServiceAccount (serviceaccount controller)",
            lambda: self._api_ok("/api/v1/namespaces/default/serviceaccounts/default"),
        )

    # ------------------------------------------------------------------ HTTP probes
    @staticmethod
    def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context trusting the cluster CA and presenting the admin client certificate."""
        ctx = ssl.create_default_context(cafile=str(self.ca_cert))
        ctx.load_cert_chain(str(self._admin.cert), str(self._admin.key))
        return ctx

    def _api_ok(self, path: str) -> bool:
        return self._http_ok(self.server + path, self.ssl_context())

    def get_json(self, path: str) -> Any:
        """GET `path` from the API server as the admin and decode the JSON answer."""
        with urllib.request.urlopen(
            self.server + path, timeout=10, context=self.ssl_context()
        ) as r:
            return json.loads(r.read())

    # ------------------------------------------------------------------ client helpers
    def env(self, *, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """This process's environment with KUBECONFIG set and the bin dir first on PATH."""
        env = dict(os.environ)
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        env.update(extra or {})
        return env

    def _run(
        self, tool: str, args: Sequence[str], *, input: str | None, check: bool, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bin_dir / tool), *args]
        proc = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            text=True,
            env=self.env(),
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise CommandError([tool, *args], proc.returncode, proc.stdout, proc.stderr)
        return proc

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120.0
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster as the admin; raise `CommandError` on failure."""
        return self._run("kubectl", args, input=input, check=check, timeout=timeout)

    def wait_established(self, crd: str, *, timeout: float = 60.0) -> None:
        """Wait until the CustomResourceDefinition `crd` (`crd/<name>`) is Established.
        `kubectl wait --for=condition=...` fails outright on a CRD the API server has not given
        conditions yet ("accessor error"), so the condition is read until it is True."""
        deadline = time.monotonic() + timeout
        path = '{.status.conditions[?(@.type=="Established")].status}'
        while True:
            proc = self.kubectl("get", crd, "-o", f"jsonpath={path}", check=False)
            if proc.returncode == 0 and proc.stdout.strip() == "True":
                return
            if time.monotonic() > deadline:
                raise CommandError(["kubectl", "get", crd], proc.returncode, proc.stdout,
                                   proc.stderr or f"{crd} not Established in {timeout:.0f} s")
            time.sleep(0.2)

    def helm(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 300.0
    ) -> subprocess.CompletedProcess[str]:
        """Run helm against this cluster as the admin; raise `CommandError` on failure."""
        return self._run("helm", args, input=input, check=check, timeout=timeout)

    def token_kubeconfig(
        self, namespace: str, serviceaccount: str, path: Path | str, *, duration: str = "24h"
    ) -> Path:
        """Write a kubeconfig that authenticates as a ServiceAccount with a fresh bound token."""
        token = self.kubectl(
            "create", "token", serviceaccount, "-n", namespace, f"--duration={duration}"
        ).stdout.strip()
        return write_kubeconfig(
            Path(path),
            server=self.server,
            ca=self.ca_cert,
            user={"token": token},
            name=f"{namespace}-{serviceaccount}",
        )
