"""A "process kubelet": runs pods as local processes, standing in for the container runtime only.

It watches pods (in some namespaces, matching a label selector), registers one Ready Node
(``process-kubelet``), binds each unscheduled pod to it (there is no scheduler), and runs the pod's
first container as a local process: ``command + args`` exactly as in the pod spec, with the
pod's environment (``env`` and ``envFrom``, including fieldRef/secretKeyRef/configMapKeyRef) on
top of this process's own environment. It reports the pod Running and Ready, records exits
(Succeeded/Failed, or a restart with backoff under ``restartPolicy: Always``), and on deletion
does what a kubelet does:
SIGTERM to the process group, wait the grace period, SIGKILL, then delete the pod with grace 0.

Run in a background thread (`ProcessKubelet.start`) or as a command::

    python -m taskqueue_devcluster.kubelet --kubeconfig K --namespace N --log-dir D
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from kubernetes import client
from kubernetes import config as _config
from kubernetes import watch as _watch
from kubernetes.client.exceptions import ApiException

DEFAULT_LABEL_SELECTOR = "app.kubernetes.io/component=taskqueue-worker"
DEFAULT_NODE_NAME = "process-kubelet"
POD_IP = "127.0.0.1"
_VAR_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")

log = logging.getLogger(__name__)
# The client is only partly typed; treat these modules' objects as dynamic.
kube_config: Any = _config
kube_watch: Any = _watch


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expand_vars(text: str, env: Mapping[str, str]) -> str:
    """Expand ``$(NAME)`` references as the kubelet does; ``$$`` escapes, unknown stay verbatim."""

    def repl(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env.get(name, m.group(0))

    return _VAR_REF.sub(repl, text)


@dataclass
class _PodProcess:
    """One pod's running (or finished) container process and its bookkeeping."""

    namespace: str
    name: str
    uid: str
    argv: list[str]
    env: dict[str, str]
    container: str
    image: str
    restart_policy: str
    log_path: Path
    popen: subprocess.Popen[bytes] | None = None
    restart_count: int = 0
    terminating: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class ProcessKubelet:
    """Runs matching pods as local processes; a context manager (start/stop)."""

    def __init__(
        self,
        kubeconfig: Path | str,
        *,
        namespaces: Sequence[str] | None = None,
        label_selector: str = DEFAULT_LABEL_SELECTOR,
        log_dir: Path | str,
        extra_env: Mapping[str, str] | None = None,
        node_name: str = DEFAULT_NODE_NAME,
        restart_backoff: float = 1.0,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.namespaces = list(namespaces) if namespaces else []
        self.label_selector = label_selector
        self.log_dir = Path(log_dir)
        self.extra_env = dict(extra_env or {})
        self.node_name = node_name
        self.restart_backoff = restart_backoff
        self.base_env = dict(base_env if base_env is not None else os.environ)
        self._api_client: Any = kube_config.new_client_from_config(config_file=str(self.kubeconfig))
        self.core: Any = client.CoreV1Api(self._api_client)
        self._lock = threading.RLock()
        self._pods: dict[str, _PodProcess] = {}
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watches: list[Any] = []

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> ProcessKubelet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> ProcessKubelet:
        """Register the node and start watching pods in background threads."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.ensure_node()
        scopes: list[str | None] = list(self.namespaces) or [None]
        for ns in scopes:
            t = threading.Thread(
                target=self._watch_loop,
                args=(ns,),
                name=f"process-kubelet-{ns or 'all'}",
                daemon=True,
            )
            t.start()
            self._threads.append(t)
        return self

    def stop(self, *, grace: float = 5.0) -> None:
        """Stop watching and kill every process this kubelet started (pods are left as they are)."""
        self._stopping.set()
        for w in list(self._watches):
            w.stop()
        with self._lock:
            pods = list(self._pods.values())
        for p in pods:
            p.terminating = True
            if p.popen is not None:
                _kill_group(p.popen, grace=grace)
        # Watch threads are daemons blocked in a read at worst: they exit at their next event.
        for t in self._threads:
            t.join(timeout=1.0)
        self._threads.clear()
        self._api_client.close()

    def pid(self, namespace: str, name: str) -> int | None:
        """PID of the process running pod `namespace/name`, if any."""
        with self._lock:
            for p in self._pods.values():
                if (
                    (p.namespace, p.name) == (namespace, name)
                    and p.popen
                    and p.popen.poll() is None
                ):
                    return p.popen.pid
        return None

    def running_pods(self) -> list[tuple[str, str]]:
        """(namespace, name) of pods whose process is currently running."""
        with self._lock:
            return [
                (p.namespace, p.name)
                for p in self._pods.values()
                if p.popen is not None and p.popen.poll() is None
            ]

    # ------------------------------------------------------------------ node
    def ensure_node(self) -> None:
        """Create the Node object (once) and report it Ready."""
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.node_name,
                "labels": {
                    "kubernetes.io/hostname": self.node_name,
                    "kubernetes.io/os": "linux",
                    "taskqueue.dev/process-kubelet": "true",
                },
            },
        }
        try:
            self.core.create_node(body)
        except ApiException as e:
            if e.status != 409:
                raise
        now = _now()
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "process kubelet is posting ready status",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "addresses": [
                    {"type": "InternalIP", "address": POD_IP},
                    {"type": "Hostname", "address": self.node_name},
                ],
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
            }
        }
        self.core.patch_node_status(self.node_name, status)

    # ------------------------------------------------------------------ watching
    def _list(self, namespace: str | None) -> Any:
        if namespace is None:
            return self.core.list_pod_for_all_namespaces(label_selector=self.label_selector)
        return self.core.list_namespaced_pod(namespace, label_selector=self.label_selector)

    def _watch_loop(self, namespace: str | None) -> None:
        while not self._stopping.is_set():
            try:
                self._list_and_watch(namespace)
            except Exception:
                if self._stopping.is_set():
                    return
                log.exception("process kubelet: watch on %s failed; re-listing", namespace)
                time.sleep(1.0)

    def _list_and_watch(self, namespace: str | None) -> None:
        pods = self._list(namespace)
        for pod in pods.items:
            self._sync_safe(pod)
        version = pods.metadata.resource_version
        seen = {(p.metadata.namespace, p.metadata.name) for p in pods.items}
        self._forget_missing(namespace, seen)
        while not self._stopping.is_set():
            w = kube_watch.Watch()
            self._watches.append(w)
            kwargs: dict[str, Any] = {
                "label_selector": self.label_selector,
                "resource_version": version,
                "timeout_seconds": 30,
                "allow_watch_bookmarks": True,
            }
            func: Callable[..., Any] = self.core.list_pod_for_all_namespaces
            args: tuple[str, ...] = ()
            if namespace is not None:
                func, args = self.core.list_namespaced_pod, (namespace,)
            try:
                for event in w.stream(func, *args, **kwargs):
                    if self._stopping.is_set():
                        return
                    version = self._handle_event(event, version)
            except ApiException as e:
                if e.status == 410:  # resource version too old: re-list
                    return
                raise
            finally:
                w.stop()
                self._watches.remove(w)

    def _handle_event(self, event: Mapping[str, Any], version: str) -> str:
        kind = event["type"]
        obj = event["object"]
        if kind == "ERROR":
            raw = event.get("raw_object") or {}
            raise ApiException(status=int(raw.get("code", 500)), reason=str(raw.get("message")))
        if isinstance(obj, Mapping):  # a BOOKMARK arrives undecoded, as a plain dict
            meta = obj.get("metadata") or {}
            return str(meta.get("resourceVersion") or version)
        new_version = str(obj.metadata.resource_version or version)
        if kind == "BOOKMARK":
            return new_version
        if kind == "DELETED":
            self._on_deleted(obj)
        else:
            self._sync_safe(obj)
        return new_version

    def _forget_missing(self, namespace: str | None, seen: set[tuple[str, str]]) -> None:
        with self._lock:
            gone = [
                p
                for p in self._pods.values()
                if (namespace is None or p.namespace == namespace)
                and (p.namespace, p.name) not in seen
            ]
        for p in gone:
            self._kill_and_forget(p)

    def _on_deleted(self, pod: Any) -> None:
        with self._lock:
            proc = self._pods.get(pod.metadata.uid)
        if proc is not None:
            self._kill_and_forget(proc)

    def _kill_and_forget(self, proc: _PodProcess) -> None:
        proc.terminating = True
        if proc.popen is not None:
            _kill_group(proc.popen, grace=0.0)
        with self._lock:
            self._pods.pop(proc.uid, None)

    # ------------------------------------------------------------------ pod sync
    def _sync_safe(self, pod: Any) -> None:
        try:
            self._sync(pod)
        except ApiException as e:
            if e.status not in (404, 409):
                log.warning("process kubelet: sync %s failed: %s", pod.metadata.name, e)

    def _sync(self, pod: Any) -> None:
        meta, spec = pod.metadata, pod.spec
        if spec.node_name not in (None, "", self.node_name):
            return
        if meta.deletion_timestamp is not None:
            self._terminate_pod(pod)
            return
        if not spec.node_name:
            self._bind(pod)
            return
        if pod.status and pod.status.phase in ("Succeeded", "Failed"):
            return
        with self._lock:
            if meta.uid in self._pods or self._stopping.is_set():
                return
            proc = self._prepare(pod)
            if proc is None:
                return
            self._pods[meta.uid] = proc
        self._launch(proc)

    def _bind(self, pod: Any) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod.metadata.name, "uid": pod.metadata.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node_name},
        }
        # The generated client cannot decode the Binding's Status answer: skip decoding.
        self.core.create_namespaced_pod_binding(
            pod.metadata.name, pod.metadata.namespace, body, _preload_content=False
        )

    def _prepare(self, pod: Any) -> _PodProcess | None:
        container = pod.spec.containers[0]
        env = self._resolve_env(pod, container)
        argv = [expand_vars(a, env) for a in [*(container.command or []), *(container.args or [])]]
        if not container.command:
            self._patch_status(
                pod.metadata.namespace,
                pod.metadata.name,
                {
                    "phase": "Failed",
                    "reason": "NoCommand",
                    "message": "process kubelet runs only containers with an explicit command",
                },
            )
            return None
        return _PodProcess(
            namespace=pod.metadata.namespace,
            name=pod.metadata.name,
            uid=pod.metadata.uid,
            argv=argv,
            env={**self.base_env, **self.extra_env, **env},
            container=container.name,
            image=container.image or "",
            restart_policy=pod.spec.restart_policy or "Always",
            log_path=self.log_dir / f"{pod.metadata.namespace}_{pod.metadata.name}.log",
        )

    @staticmethod
    def _spawn(proc: _PodProcess, banner: str) -> None:
        """Start the pod's process in its own session, appending its output to the pod's log."""
        with proc.log_path.open("ab") as out:
            out.write(f"--- process kubelet: {banner} ---\n".encode())
            out.flush()
            proc.popen = subprocess.Popen(
                proc.argv,
                env=proc.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _launch(self, proc: _PodProcess) -> None:
        try:
            self._spawn(proc, f"starting {proc.argv!r}")
        except OSError as e:
            with proc.log_path.open("ab") as out:
                out.write(f"--- process kubelet: cannot start: {e} ---\n".encode())
            self._report_exit(proc, 127, reason="StartError", message=str(e))
            with self._lock:
                self._pods.pop(proc.uid, None)
            return
        self._report_running(proc)
        threading.Thread(
            target=self._monitor, args=(proc,), name=f"pod-{proc.name}", daemon=True
        ).start()

    def _monitor(self, proc: _PodProcess) -> None:
        while True:
            assert proc.popen is not None
            code = proc.popen.wait()
            if proc.terminating or self._stopping.is_set():
                proc.done.set()
                return
            again = proc.restart_policy == "Always" or (
                proc.restart_policy == "OnFailure" and code != 0
            )
            self._report_exit(proc, code, final=not again)
            if not again:
                proc.done.set()
                return
            time.sleep(min(self.restart_backoff * 2 ** min(proc.restart_count, 5), 30.0))
            if proc.terminating or self._stopping.is_set():
                proc.done.set()
                return
            proc.restart_count += 1
            self._spawn(proc, f"restart #{proc.restart_count}")
            self._report_running(proc)

    def _terminate_pod(self, pod: Any) -> None:
        """Graceful deletion: SIGTERM, wait the grace period, SIGKILL, delete with grace 0."""
        with self._lock:
            proc = self._pods.get(pod.metadata.uid)
            if proc is not None and proc.terminating:
                return
            if proc is not None:
                proc.terminating = True
        grace = pod.metadata.deletion_grace_period_seconds
        if grace is None:
            grace = pod.spec.termination_grace_period_seconds
        grace = 30 if grace is None else int(grace)
        if proc is None or proc.popen is None or proc.popen.poll() is not None:
            self._delete_now(pod)
            return
        threading.Thread(
            target=self._finish_termination,
            args=(proc, pod, float(grace)),
            name=f"terminate-{proc.name}",
            daemon=True,
        ).start()

    def _finish_termination(self, proc: _PodProcess, pod: Any, grace: float) -> None:
        assert proc.popen is not None
        _kill_group(proc.popen, grace=grace)
        code = proc.popen.returncode
        with proc.log_path.open("ab") as out:
            out.write(f"--- process kubelet: terminated, exit code {code} ---\n".encode())
        with self._lock:
            self._pods.pop(proc.uid, None)
        if not self._stopping.is_set():
            self._delete_now(pod)

    def _delete_now(self, pod: Any) -> None:
        body = client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=pod.metadata.uid)
        )
        try:
            self.core.delete_namespaced_pod(
                pod.metadata.name, pod.metadata.namespace, body=body, grace_period_seconds=0
            )
        except ApiException as e:
            if e.status not in (404, 409):
                raise

    # ------------------------------------------------------------------ status
    def _patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        try:
            self.core.patch_namespaced_pod_status(name, namespace, {"status": dict(status)})
        except ApiException as e:
            if e.status != 404:
                log.warning("process kubelet: status of %s/%s: %s", namespace, name, e)

    @staticmethod
    def _conditions(ready: bool, now: str) -> list[dict[str, str]]:
        flag = "True" if ready else "False"
        return [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "Initialized", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": flag, "lastTransitionTime": now},
            {"type": "Ready", "status": flag, "lastTransitionTime": now},
        ]

    def _report_running(self, proc: _PodProcess) -> None:
        assert proc.popen is not None
        now = _now()
        self._patch_status(
            proc.namespace,
            proc.name,
            {
                "phase": "Running",
                "hostIP": POD_IP,
                "hostIPs": [{"ip": POD_IP}],
                "podIP": POD_IP,
                "podIPs": [{"ip": POD_IP}],
                "startTime": now,
                "conditions": self._conditions(True, now),
                "containerStatuses": [
                    {
                        "name": proc.container,
                        "image": proc.image,
                        "imageID": "",
                        "containerID": f"process://{proc.popen.pid}",
                        "ready": True,
                        "started": True,
                        "restartCount": proc.restart_count,
                        "state": {"running": {"startedAt": now}},
                    }
                ],
            },
        )

    def _report_exit(
        self,
        proc: _PodProcess,
        code: int,
        *,
        final: bool = True,
        reason: str | None = None,
        message: str = "",
    ) -> None:
        now = _now()
        terminated = {
            "exitCode": code,
            "reason": reason or ("Completed" if code == 0 else "Error"),
            "message": message,
            "finishedAt": now,
        }
        status: dict[str, Any] = {
            "conditions": self._conditions(False, now),
            "containerStatuses": [
                {
                    "name": proc.container,
                    "image": proc.image,
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": proc.restart_count,
                    "state": {"terminated": terminated}
                    if final
                    else {
                        "waiting": {"reason": "CrashLoopBackOff", "message": f"exit code {code}"}
                    },
                    "lastState": {"terminated": terminated},
                }
            ],
        }
        if final:
            status["phase"] = "Succeeded" if code == 0 else "Failed"
        self._patch_status(proc.namespace, proc.name, status)

    # ------------------------------------------------------------------ environment
    def _resolve_env(self, pod: Any, container: Any) -> dict[str, str]:
        ns = pod.metadata.namespace
        env: dict[str, str] = {}
        for source in container.env_from or []:
            prefix = source.prefix or ""
            if source.config_map_ref is not None:
                data = self._config_map(
                    ns, source.config_map_ref.name, source.config_map_ref.optional
                )
                env.update({prefix + k: v for k, v in data.items()})
            if source.secret_ref is not None:
                data = self._secret(ns, source.secret_ref.name, source.secret_ref.optional)
                env.update({prefix + k: v for k, v in data.items()})
        for var in container.env or []:
            if var.value_from is None:
                env[var.name] = expand_vars(var.value or "", env)
                continue
            value = self._value_from(pod, var.value_from)
            if value is not None:
                env[var.name] = value
        return env

    def _value_from(self, pod: Any, source: Any) -> str | None:
        ns = pod.metadata.namespace
        if source.field_ref is not None:
            return _field_value(pod, source.field_ref.field_path)
        if source.secret_key_ref is not None:
            ref = source.secret_key_ref
            return self._secret(ns, ref.name, ref.optional).get(ref.key)
        if source.config_map_key_ref is not None:
            ref = source.config_map_key_ref
            return self._config_map(ns, ref.name, ref.optional).get(ref.key)
        return None  # resourceFieldRef and others: not modelled

    def _config_map(self, namespace: str, name: str, optional: bool | None) -> dict[str, str]:
        try:
            return dict(self.core.read_namespaced_config_map(name, namespace).data or {})
        except ApiException as e:
            if e.status == 404 and optional:
                return {}
            raise

    def _secret(self, namespace: str, name: str, optional: bool | None) -> dict[str, str]:
        import base64

        try:
            data = self.core.read_namespaced_secret(name, namespace).data or {}
        except ApiException as e:
            if e.status == 404 and optional:
                return {}
            raise
        return {k: base64.b64decode(v).decode() for k, v in data.items()}


_FIELD_PATHS: dict[str, Callable[[Any], str | None]] = {
    "metadata.name": lambda p: p.metadata.name,
    "metadata.namespace": lambda p: p.metadata.namespace,
    "metadata.uid": lambda p: p.metadata.uid,
    "spec.nodeName": lambda p: p.spec.node_name or DEFAULT_NODE_NAME,
    "spec.serviceAccountName": lambda p: p.spec.service_account_name,
    "status.podIP": lambda p: POD_IP,
    "status.hostIP": lambda p: POD_IP,
}
_MAP_FIELD = re.compile(r"metadata\.(labels|annotations)\['([^']+)'\]")


def _field_value(pod: Any, path: str) -> str | None:
    getter = _FIELD_PATHS.get(path)
    if getter is not None:
        value = getter(pod)
        return None if value is None else str(value)
    m = _MAP_FIELD.fullmatch(path)
    if m:
        mapping = getattr(pod.metadata, m.group(1)) or {}
        value = mapping.get(m.group(2))
        return None if value is None else str(value)
    return None


def _kill_group(popen: subprocess.Popen[Any], *, grace: float) -> None:
    """SIGTERM the process group, wait up to `grace` seconds, then SIGKILL it."""
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM if grace > 0 else signal.SIGKILL)
        try:
            popen.wait(timeout=grace if grace > 0 else 5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGKILL)


def _parse_env(pairs: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--env expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: run a process kubelet until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m taskqueue_devcluster.kubelet")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", action="append", default=[], help="repeatable; default all")
    parser.add_argument("--selector", default=DEFAULT_LABEL_SELECTOR)
    parser.add_argument("--log-dir", default="process-kubelet-logs")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for every pod")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    kubelet = ProcessKubelet(
        args.kubeconfig,
        namespaces=args.namespace,
        label_selector=args.selector,
        log_dir=args.log_dir,
        extra_env=_parse_env(args.env),
    )
    with kubelet:
        log.info("process kubelet running (selector %s)", args.selector)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
