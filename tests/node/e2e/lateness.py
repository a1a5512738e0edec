"""Lateness of scheduled tasks on the real node (issue 33): slot time -> handler start.

The chart's operator (helm install, its own namespace and release) fires every-second schedules
(six-field cron, seconds first) of one TaskQueue whose worker pod, from the handler image
(`e2etasks.tasks:started`), logs each task's id and the unix time its handler started. The task
id is `<schedule>:<slot in UTC>`, so the slot comes from the id; pods and the operator read the
node's one clock. Run by `bench/schedules/node_lateness.py` (1,000 slots); it lives beside the
node tests because it drives their fixtures (`conftest.running_node`, the handler image).

The worker pod is up and registered before the schedules are added (the figure is the firing
path: fire-ahead into the delayed zset, the workers' promoter, a slot taking the task; not pod
start-up), and the fleet is held at one pod (minReplicas = maxReplicas = 1, concurrency 16).
The scaling is the spec's default: a 2 s poll and podStartupSeconds 30, so slots are fired about
32 s ahead.
"""

from __future__ import annotations

import calendar
import json
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from tests.node.e2e.conftest import HANDLER_IMAGE, NodeCluster, uninstall_release

CHART = Path(__file__).resolve().parents[3] / "charts" / "taskqueue-operator"
TQ = "ticks"
QUEUE = "ticks:q"
LINE = re.compile(r"^started (\S+):(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (\d+\.\d+)$", re.M)


@dataclass
class Run:
    """What one measurement saw: per expected slot, the handler starts logged for it."""

    schedules: int
    seconds: int
    first_slot: int
    starts: dict[str, list[float]] = field(default_factory=dict)
    outside: int = 0
    """Starts logged for slots outside the measured window (before or after it)."""

    @property
    def lateness_ms(self) -> list[float]:
        """Per slot started, its first start minus its slot, in ms, sorted."""
        return sorted((min(v) - slot_of(k)) * 1000 for k, v in self.starts.items() if v)

    @property
    def missing(self) -> list[str]:
        return sorted(k for k, v in self.starts.items() if not v)

    @property
    def duplicated(self) -> list[str]:
        return sorted(k for k, v in self.starts.items() if len(v) > 1)

    def summary(self) -> dict[str, Any]:
        late = self.lateness_ms
        q = statistics.quantiles(late, n=100, method="inclusive") if len(late) > 1 else late * 99
        return {"schedules": self.schedules, "seconds": self.seconds,
                "slots_expected": len(self.starts), "slots_started": len(late),
                "missing": self.missing, "duplicated": self.duplicated,
                "starts_outside_window": self.outside,
                "p50_ms": round(q[49], 1), "p99_ms": round(q[98], 1),
                "max_ms": round(late[-1], 1) if late else None,
                "min_ms": round(late[0], 1) if late else None,
                "latest_ms": [round(x, 1) for x in late[-10:]]}


def slot_of(task_id: str) -> float:
    """The slot (unix s) in a schedule's task id `<schedule>:<YYYY-MM-DDTHH:MM:SSZ>`."""
    stamp = task_id.rsplit(":", 3)
    text = ":".join(stamp[-3:])
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))


def slot_id(name: str, slot: int) -> str:
    return f"{name}:{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(slot))}"


def starts_in(logs: str) -> list[tuple[str, float]]:
    """(task id, start) of every `started` line the handler wrote."""
    return [(f"{m[1]}:{m[2]}", float(m[3])) for m in LINE.finditer(logs)]


def window(started: list[tuple[str, float]], *, names: list[str], seconds: int) -> Run:
    """The run over the `seconds` slots from the first slot any schedule fired: every schedule's
    slot in that window is expected once."""
    first = int(min(slot_of(i) for i, _ in started))
    run = Run(schedules=len(names), seconds=seconds, first_slot=first,
              starts={slot_id(n, first + k): [] for n in names for k in range(seconds)})
    for task_id, at in started:
        if task_id in run.starts:
            run.starts[task_id].append(at)
        else:
            run.outside += 1
    return run


def taskqueue(namespace: str, redis_url: str, schedules: list[dict[str, Any]],
              ) -> dict[str, Any]:
    return {
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": TQ, "namespace": namespace},
        "spec": {
            "redis": {"url": redis_url},
            "queues": [{"key": QUEUE}],
            "worker": {"image": HANDLER_IMAGE, "handler": "e2etasks.tasks:started",
                       "concurrency": 16, "terminationGracePeriodSeconds": 5},
            "scaling": {"minReplicas": 1, "maxReplicas": 1},
            "schedules": schedules,
        },
    }


def wait(predicate: Callable[[], Any], what: str, timeout: float, diagnose: Callable[[], str],
         ) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}\n{diagnose()}")


class Release:
    """The chart installed in `namespace`, and the TaskQueue measured there."""

    def __init__(self, nc: NodeCluster, *, namespace: str, release: str) -> None:
        self.nc = nc
        self.ns = namespace
        self.release = release
        self.r = redis.Redis(port=nc.redis.port, decode_responses=True)

    def get(self, *args: str) -> Any:
        return json.loads(self.nc.cp.kubectl("get", "-n", self.ns, "-o", "json", *args).stdout)

    def diagnose(self) -> str:
        out = self.nc.cp.kubectl("get", "pods,deploy,tq", "-n", self.ns, "-o", "wide",
                                 check=False)
        logs = self.nc.cp.kubectl("logs", "-n", self.ns, "-l",
                                  "app.kubernetes.io/component=operator", "--tail=20",
                                  check=False)
        return (out.stdout + out.stderr + "\n--- operator:\n" + logs.stdout + logs.stderr
                + "\n--- kubelet:\n" + self.nc.node.log_tail("kubelet", 15))

    def install(self) -> None:
        self.nc.cp.kubectl("create", "namespace", self.ns)
        try:
            self.nc.cp.helm("install", self.release, str(CHART), "-n", self.ns,
                            "--set", f"watchNamespaces={{{self.ns}}}",
                            "--wait", "--timeout", "240s", timeout=300)
        except Exception:
            print(self.diagnose())
            raise

    def uninstall(self) -> None:
        uninstall_release(self.nc.cp, release=self.release, namespace=self.ns, taskqueues=[TQ])

    def apply(self, schedules: list[dict[str, Any]]) -> None:
        manifest = taskqueue(self.ns, self.nc.redis_url_for_pods, schedules)
        self.nc.cp.kubectl("apply", "-f", "-", input=json.dumps(manifest))

    def worker_ready(self) -> bool:
        pods = self.get("pods", "-l", f"taskqueue.dev/taskqueue={TQ}")["items"]
        ready = [p for p in pods if p["status"].get("phase") == "Running"
                 and all(c.get("ready") for c in p["status"].get("containerStatuses", []))]
        return bool(ready) and self.r.zcard(f"{QUEUE}:workers") >= 1

    def worker_logs(self) -> str:
        out = []
        for pod in self.get("pods", "-l", f"taskqueue.dev/taskqueue={TQ}")["items"]:
            name = pod["metadata"]["name"]
            out.append(self.nc.cp.kubectl("logs", "-n", self.ns, name, check=False).stdout)
            if any(c.get("restartCount") for c in pod["status"].get("containerStatuses", [])):
                out.append(self.nc.cp.kubectl("logs", "-n", self.ns, name, "--previous",
                                              check=False).stdout)
        return "\n".join(out)

    def measure(self, *, schedules: int, seconds: int) -> Run:
        """Every-second schedules added to a TaskQueue whose worker is up; the run over
        `seconds` slots of each."""
        self.apply([])
        wait(self.worker_ready, "the worker pod ready and registered", 300, self.diagnose)
        names = [f"tick{i}" for i in range(schedules)]
        self.apply([{"name": n, "cron": "* * * * * *", "queue": QUEUE, "payload": n}
                    for n in names])
        wait(lambda: starts_in(self.worker_logs()), "the first slot's task", 120,
             self.diagnose)
        first = min(slot_of(i) for i, _ in starts_in(self.worker_logs()))
        time.sleep(max(0.0, first + seconds + 3 - time.time()))
        self.apply([{"name": n, "cron": "* * * * * *", "queue": QUEUE, "payload": n,
                     "suspend": True} for n in names])
        return window(starts_in(self.worker_logs()), names=names, seconds=seconds)
