"""What a TaskQueue author may run and scale, as the cluster admin bounded it: pure, no I/O.

Creating a TaskQueue creates pods (any image, service account, env from any Secret of its
namespace), and `spec.scaleTargetRef` scales any Deployment there. The operator's flags
`--allowed-image-prefix` (repeatable) and `--scale-target-label KEY=VALUE` (the chart's
`workerPolicy` values) bound both; `WorkerRules` says what a TaskQueue breaks, as one line that
names the field and the fix. The poller refuses such a TaskQueue (no Deployment is created,
updated or scaled) and reports the line as the Ready condition and a Warning Event.
"""

from __future__ import annotations

from dataclasses import dataclass

from taskqueue.api import models
from taskqueue.controller import workload


def parse_label(text: str) -> tuple[str, str]:
    """`KEY=VALUE` as (key, value); ValueError naming the flag when it is not that."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--scale-target-label {text!r}: expected KEY=VALUE, "
                         "e.g. taskqueue.dev/scalable=true")
    return key.strip(), value.strip()


@dataclass(frozen=True)
class WorkerRules:
    """The bounds; empty ones allow everything (the default)."""

    image_prefixes: tuple[str, ...] = ()
    """A worker image must start with one of these (none: any image)."""
    scale_target_label: tuple[str, str] | None = None
    """A Deployment named by scaleTargetRef must carry this label (None: any Deployment)."""

    def image_problem(self, tq: models.TaskQueue) -> str | None:
        """Why the worker image of `tq` is not allowed, None when it is."""
        if not self.image_prefixes:
            return None
        image = tq.spec.worker.image or workload.DEFAULT_IMAGE
        if image.startswith(self.image_prefixes):
            return None
        allowed = ", ".join(self.image_prefixes)
        if tq.spec.worker.image is None:
            return (f"spec.worker.image is unset and the default image {image} is not under an "
                    f"allowed prefix ({allowed}); set spec.worker.image to an image under one")
        return (f"spec.worker.image {image!r} is not allowed here: use an image under one of "
                f"{allowed} (the operator's --allowed-image-prefix)")

    def scale_target_problem(self, tq: models.TaskQueue, labels: dict[str, str]) -> str | None:
        """Why the Deployment `tq` names in scaleTargetRef (carrying `labels`) may not be
        scaled, None when it may (or when the TaskQueue owns its Deployment)."""
        ref = tq.spec.scaleTargetRef
        if ref is None or self.scale_target_label is None:
            return None
        key, value = self.scale_target_label
        if labels.get(key) == value:
            return None
        return (f"spec.scaleTargetRef.name: Deployment {ref.name!r} lacks the label "
                f"{key}={value} that Deployments scaled by a TaskQueue must carry; ask whoever "
                f"owns it to add it (kubectl label deployment {ref.name} {key}={value}) or drop "
                "scaleTargetRef to let the TaskQueue own its Deployment")
