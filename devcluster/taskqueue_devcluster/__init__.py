"""A real local Kubernetes control plane for tests and the demo.

`ControlPlane` runs etcd, kube-apiserver (RBAC, service-account tokens, TLS with a generated CA) and
kube-controller-manager from binaries built by ``scripts/control-plane build``;
`ProcessKubelet` stands in for the container runtime only: it binds worker pods to a fake node and
runs each pod's container command as a local process.
"""

from typing import TYPE_CHECKING, Any

from taskqueue_devcluster.controlplane import (
    BinariesNotBuiltError,
    CommandError,
    ControlPlane,
    ControlPlaneError,
    find_bin_dir,
)

if TYPE_CHECKING:
    from taskqueue_devcluster.kubelet import DEFAULT_LABEL_SELECTOR, ProcessKubelet


def __getattr__(name: str) -> Any:
    # Lazy, so that `python -m taskqueue_devcluster.kubelet` does not import the module twice.
    if name in ("DEFAULT_LABEL_SELECTOR", "ProcessKubelet"):
        from taskqueue_devcluster import kubelet

        return getattr(kubelet, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_LABEL_SELECTOR",
    "BinariesNotBuiltError",
    "CommandError",
    "ControlPlane",
    "ControlPlaneError",
    "ProcessKubelet",
    "find_bin_dir",
]
