"""The operator's only Kubernetes I/O, behind a narrow interface (`Kube`).

`KubeClient` implements it with the `kubernetes` client (kubeconfig on a laptop, the pod's
service account in a cluster), running the blocking calls in threads. Everything the poller and
the handlers need from the API server is one method here, so they are tested against the real API
server and nothing else needs to know how a call is made; each call is counted
(`taskqueue_kube_requests_total{call}`). `LeaseApi` holds the Lease calls of
leader election (`taskqueue.controller.leader`), blocking: the elector runs them in a thread.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from kubernetes import client as _client
from kubernetes import config as _config
from kubernetes.client.exceptions import ApiException

from taskqueue.api import models
from taskqueue.telemetry import metrics

T = TypeVar("T")

k8s: Any = _client
kube_config: Any = _config
FIELD_MANAGER = "taskqueue-operator"
REPORTING_COMPONENT = "taskqueue-operator"


class NotFoundError(LookupError):
    """The object does not exist."""


class ConflictError(RuntimeError):
    """The object already exists, or changed since it was read (HTTP 409)."""


class ApiError(Exception):
    """A failed call of `LeaseApi`: the HTTP status and the API server's reason."""

    def __init__(self, status: int | None, reason: str | None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class DeploymentState:
    """What the poller reads of a Deployment."""

    name: str
    replicas: int
    """spec.replicas: what was last asked for."""
    ready_replicas: int
    selector: dict[str, str]
    owner_uids: tuple[str, ...] = ()
    spec_hash: str | None = None
    resource_version: str = ""
    labels: tuple[tuple[str, str], ...] = ()
    """metadata.labels, sorted (a tuple: the state stays hashable)."""
    pods: int = 0
    """status.replicas: the pods it has (starting or running, not terminating)."""


@dataclass(frozen=True)
class PodState:
    name: str
    deletion_cost: str | None
    deleting: bool
    created: float = 0.0
    """creationTimestamp (unix seconds; 0 when unknown)."""
    scheduled: bool = False
    """spec.nodeName is set."""
    phase: str = ""
    """status.phase ("" when not reported yet, which the ReplicaSet ranks as Pending)."""
    ready: bool = False
    """The pod's Ready condition is True."""

    @property
    def active(self) -> bool:
        """Counted by its ReplicaSet: not being deleted, not Succeeded or Failed (an evicted
        pod lingers as Failed until garbage-collected)."""
        return not self.deleting and self.phase not in ("Succeeded", "Failed")


@dataclass(frozen=True)
class ObjectRef:
    """The TaskQueue an Event is about."""

    namespace: str
    name: str
    uid: str
    api_version: str = models.API_VERSION
    kind: str = models.KIND


class Kube(Protocol):
    """What the operator asks of the API server."""

    async def secret_value(self, namespace: str, name: str, key: str) -> str: ...
    async def get_taskqueue(self, namespace: str, name: str) -> dict[str, Any]: ...
    async def get_deployment(self, namespace: str, name: str) -> DeploymentState | None: ...
    # The create and the PUT return the Deployment they made, the scale its new resourceVersion
    # (None when unknown).
    async def create_deployment(self, body: dict[str, Any]) -> DeploymentState | None: ...
    async def replace_deployment(self, body: dict[str, Any], *, replicas: int,
                                 resource_version: str) -> DeploymentState | None: ...
    async def scale_deployment(self, namespace: str, name: str, replicas: int) -> str | None: ...
    async def list_pods(self, namespace: str, selector: dict[str, str]) -> list[PodState]: ...
    async def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        ...
    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None: ...
    async def event(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> None: ...


def deployment_state(body: Mapping[str, Any]) -> DeploymentState:
    """The `DeploymentState` of a Deployment as the API returns it in JSON (e.g. a watch event)."""
    meta, spec, status = body["metadata"], body.get("spec") or {}, body.get("status") or {}
    replicas = spec.get("replicas")
    return DeploymentState(
        name=meta["name"],
        replicas=int(replicas if replicas is not None else 1),
        ready_replicas=int(status.get("readyReplicas") or 0),
        pods=int(status.get("replicas") or 0),
        selector=dict((spec.get("selector") or {}).get("matchLabels") or {}),
        owner_uids=tuple(o["uid"] for o in meta.get("ownerReferences") or ()),
        spec_hash=(meta.get("annotations") or {}).get("taskqueue.dev/spec-hash"),
        resource_version=str(meta.get("resourceVersion") or ""),
        labels=tuple(sorted((meta.get("labels") or {}).items())),
    )


def _resource_version(obj: Any) -> str | None:
    meta = getattr(obj, "metadata", None)
    rv = getattr(meta, "resource_version", None)
    return str(rv) if rv else None


def newer_or_same(rv: str, than: str) -> bool:
    """Whether resourceVersion `rv` is not older than `than`. They are etcd revisions (integers)
    on every API server in practice; when either is not, order is unknown and this says True."""
    try:
        return int(rv) >= int(than)
    except ValueError:
        return True


def micro_time(ts: datetime.datetime) -> str:
    """`ts` as the API server's MicroTime (Events, Lease acquire and renew times)."""
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _now() -> str:
    return micro_time(datetime.datetime.now(datetime.UTC))


def _ready(pod: Any) -> bool:
    conditions = (pod.status and pod.status.conditions) or ()
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


@dataclass
class KubeClient:
    """`Kube` over the `kubernetes` client; `kubeconfig=None` means in-cluster or ~/.kube/config."""

    kubeconfig: str | None = None
    api: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.api = load_api_client(self.kubeconfig)
        self.core = k8s.CoreV1Api(self.api)
        self.apps = k8s.AppsV1Api(self.api)
        self.custom = k8s.CustomObjectsApi(self.api)

    def close(self) -> None:
        self.api.close()

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)` in a thread, counted (`metrics.KUBE_REQUESTS`) by its name."""
        metrics.KUBE_REQUESTS.labels(fn.__name__).inc()
        try:
            return await asyncio.to_thread(fn, *args, **kwargs)
        except ApiException as e:
            if e.status == 404:
                raise NotFoundError(str(e.reason)) from None
            if e.status == 409:
                raise ConflictError(str(e.reason)) from None
            raise

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        secret = await self._call(self.core.read_namespaced_secret, name, namespace)
        data = secret.data or {}
        if key not in data:
            raise NotFoundError(f"secret {name} has no key {key!r}")
        return base64.b64decode(data[key]).decode()

    async def get_taskqueue(self, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await self._call(
            self.custom.get_namespaced_custom_object, models.GROUP, models.VERSION, namespace,
            models.PLURAL, name)
        return found

    async def _raw(self, fn: Any, *args: Any, **kwargs: Any) -> bytes:
        """`fn`'s response body, read in the thread and not turned into the client's models
        (building a V1Deployment cost more CPU than the GET itself)."""
        def body() -> Any:
            return fn(*args, _preload_content=False, **kwargs).data
        body.__name__ = fn.__name__
        return bytes(await self._call(body))

    async def get_deployment(self, namespace: str, name: str) -> DeploymentState | None:
        try:
            raw = await self._raw(self.apps.read_namespaced_deployment, name, namespace)
        except NotFoundError:
            return None
        return deployment_state(json.loads(raw))

    async def create_deployment(self, body: dict[str, Any]) -> DeploymentState | None:
        return deployment_state(json.loads(await self._raw(
            self.apps.create_namespaced_deployment, body["metadata"]["namespace"], body,
            field_manager=FIELD_MANAGER)))

    async def replace_deployment(self, body: dict[str, Any], *, replicas: int,
                                 resource_version: str) -> DeploymentState | None:
        """PUT `body` keeping `replicas`; fails with 409 if the Deployment changed meanwhile."""
        new = {**body, "metadata": {**body["metadata"], "resourceVersion": resource_version},
               "spec": {**body["spec"], "replicas": replicas}}
        return deployment_state(json.loads(await self._raw(
            self.apps.replace_namespaced_deployment, new["metadata"]["name"],
            new["metadata"]["namespace"], new, field_manager=FIELD_MANAGER)))

    async def scale_deployment(self, namespace: str, name: str, replicas: int) -> str | None:
        return _resource_version(await self._call(
            self.apps.patch_namespaced_deployment_scale, name, namespace,
            {"spec": {"replicas": replicas}}, field_manager=FIELD_MANAGER))

    async def list_pods(self, namespace: str, selector: dict[str, str]) -> list[PodState]:
        pods = await self._call(self.core.list_namespaced_pod, namespace,
                                label_selector=_selector(selector))
        return [
            PodState(
                name=p.metadata.name,
                deletion_cost=(p.metadata.annotations or {}).get(
                    "controller.kubernetes.io/pod-deletion-cost"),
                deleting=p.metadata.deletion_timestamp is not None,
                created=(p.metadata.creation_timestamp.timestamp()
                         if p.metadata.creation_timestamp else 0.0),
                scheduled=bool(p.spec.node_name),
                phase=(p.status and p.status.phase) or "",
                ready=_ready(p),
            )
            for p in pods.items
        ]

    async def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        await self._call(self.core.patch_namespaced_pod, name, namespace,
                         {"metadata": {"annotations": annotations}},
                         field_manager=FIELD_MANAGER)

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self._raw(self.custom.patch_namespaced_custom_object_status, models.GROUP,
                        models.VERSION, namespace, models.PLURAL, name, {"status": status},
                        field_manager=FIELD_MANAGER)

    async def event(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> None:
        now = _now()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{ref.name}.{uuid.uuid4().hex[:16]}",
                         "namespace": ref.namespace},
            "involvedObject": {"apiVersion": ref.api_version, "kind": ref.kind,
                               "name": ref.name, "namespace": ref.namespace, "uid": ref.uid},
            "type": type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": REPORTING_COMPONENT},
            "reportingComponent": REPORTING_COMPONENT,
            "reportingInstance": REPORTING_COMPONENT,
            "firstTimestamp": now[:19] + "Z",
            "lastTimestamp": now[:19] + "Z",
            "count": 1,
        }
        await self._call(self.core.create_namespaced_event, ref.namespace, body)


class LeaseApi:
    """The `coordination.k8s.io/v1` Lease calls of leader election and sharding, blocking; a
    failed call raises `ApiError`."""

    def __init__(self, api_client: Any) -> None:
        self.api = k8s.CoordinationV1Api(api_client)

    def read(self, namespace: str, name: str) -> Any:
        return _lease_call(self.api.read_namespaced_lease, name, namespace)

    def replace(self, namespace: str, name: str, body: dict[str, Any]) -> Any:
        return _lease_call(self.api.replace_namespaced_lease, name, namespace, body)

    def create(self, namespace: str, body: dict[str, Any]) -> Any:
        return _lease_call(self.api.create_namespaced_lease, namespace, body)

    def list(self, namespace: str, selector: dict[str, str]) -> list[Any]:
        """The Leases of `namespace` carrying the labels of `selector`."""
        found = _lease_call(self.api.list_namespaced_lease, namespace,
                            label_selector=_selector(selector))
        return list(found.items)

    def delete(self, namespace: str, name: str, *, resource_version: str | None = None) -> None:
        """Delete a Lease (only at `resource_version` when given: not one renewed since)."""
        options = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(
            resource_version=resource_version)) if resource_version else None
        _lease_call(self.api.delete_namespaced_lease, name, namespace, body=options)


def _lease_call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except ApiException as e:
        raise ApiError(e.status, e.reason) from e


API_THREADS = 32
"""Threads the blocking client's calls of the polls (status writes, Events, Deployments) run in:
the event loop's default executor (`main.run` sizes it), as many as the client's connection
pool. asyncio's default (cores + 4) let 6 threads carry 1,000 TaskQueues' status writes."""
_LEASE_THREAD = ThreadPoolExecutor(1, thread_name_prefix="leases")


async def in_lease_thread(fn: Callable[[], T]) -> T:
    """`fn()` in the one thread kept for the Lease calls (leader election, shard Leases): a
    renewal never queues behind the polls' calls in the default executor, where one late past
    the Lease duration fenced a shard replica (it released every TaskQueue it held) or would
    lose the leader its Lease."""
    return await asyncio.get_running_loop().run_in_executor(_LEASE_THREAD, fn)


def load_api_client(kubeconfig: str | None, *, pool_size: int = API_THREADS) -> Any:
    """An ApiClient from `kubeconfig`, else in-cluster config, else the default kubeconfig."""
    configuration = load_configuration(kubeconfig)
    configuration.connection_pool_maxsize = pool_size
    return k8s.ApiClient(configuration)


def load_configuration(kubeconfig: str | None) -> Any:
    """The client Configuration: `kubeconfig`, else in-cluster, else the default kubeconfig."""
    configuration = k8s.Configuration()
    if kubeconfig:
        kube_config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        try:
            kube_config.load_incluster_config(client_configuration=configuration)
        except kube_config.ConfigException:
            kube_config.load_kube_config(client_configuration=configuration)
    return configuration


def bearer_token(configuration: Any) -> str | None:
    """The bearer token of `configuration`, if it authenticates with one."""
    header = (configuration.get_api_key_with_prefix("BearerToken")
              or configuration.get_api_key_with_prefix("authorization"))
    if not header:
        return None
    return str(header).split(" ", 1)[-1]
