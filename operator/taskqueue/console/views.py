"""What the pages show, computed from a snapshot and the spec: plain dicts the templates and the
JSON refresh render. Pure: no I/O, every text of Redis through `printable` (the templates escape
it; bytes that are not UTF-8 show as `\\xNN`).

Each concept is one function feeding one template partial (`templates/partials/`): the
queues table, the replicas, the rates, the chart series, the decision log, the workers, a task,
a dead letter. Concepts read from the status or the observation (flow control, schedules, task
progress) get their own function and partial beside these.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskqueue.cli import ui
from taskqueue.cli.records import DeadLetter, printable
from taskqueue.console.live import Snapshot
from taskqueue.console.reads import Pending, digest
from taskqueue.scaling import waits
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import history, keys, lifecycle


@dataclass(frozen=True)
class Hosted:
    """A TaskQueue the console shows: where it lives and what its spec says."""

    namespace: str
    name: str
    schema: keys.KeySchema
    target_wait: dict[str, float]
    """spec.scaling.targetWaitSeconds (empty: none)."""
    max_replicas: int | None = None
    status: dict[str, Any] | None = None
    """The TaskQueue's status as the API server holds it (in the cluster), else None."""

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


def duration(seconds: float | None) -> str:
    """`4.2s`, `3m05s`, `2h10m`, `-` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "-"
    s = max(0.0, seconds)
    if s < 60:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}/s"


def _p95(obs: QueueObservation, queue: str) -> float | None:
    return waits.wait_quantile_of(obs.waited.get(queue, ()), 0.95)


def queue_rows(tq: Hosted, obs: QueueObservation | None) -> list[dict[str, Any]]:
    """Per queue: backlog, oldest task, p95 wait against its target."""
    rows = []
    for q in tq.schema.queues:
        p95 = None if obs is None else _p95(obs, q.key)
        target = tq.target_wait.get(q.key)
        rows.append({
            "key": printable(q.key), "type": q.type,
            "backlog": None if obs is None else obs.backlog.get(q.key, 0),
            "oldest": duration(None if obs is None else obs.oldest_age(q.key)),
            "p95": duration(p95), "target": duration(target),
            "late": p95 is not None and target is not None and p95 > target,
        })
    return rows


def _last(points: Sequence[tuple[str, history.HistoryPoint]]) -> history.HistoryPoint | None:
    return points[-1][1] if points else None


def rates(point: history.HistoryPoint | None) -> dict[str, float | None]:
    """Arrivals and completions per second over the last history interval."""
    if point is None or point.dt <= 0:
        return {"arrivals": None, "completions": None}
    arrived = [q.arrived for q in point.queues.values() if q.arrived is not None]
    seconds = point.dt / 1000
    return {"arrivals": sum(arrived) / seconds if arrived else None,
            "completions": None if point.completed is None else point.completed / seconds}


def replicas(tq: Hosted, point: history.HistoryPoint | None) -> dict[str, Any]:
    """Desired, actual and ready replicas: the status when the API server is read, else the last
    history point (the operator records them there)."""
    status = tq.status or {}
    if "desiredReplicas" in status or "replicas" in status:
        return {"desired": status.get("desiredReplicas"), "actual": status.get("replicas"),
                "ready": status.get("readyReplicas"), "source": "status"}
    if point is None:
        return {"desired": None, "actual": None, "ready": None, "source": "none"}
    return {"desired": point.desired, "actual": point.replicas, "ready": point.ready,
            "source": "history"}


def conditions(tq: Hosted) -> list[dict[str, str]]:
    return [{"type": str(c.get("type", "")), "status": str(c.get("status", "")),
             "reason": str(c.get("reason", "")), "message": str(c.get("message", ""))}
            for c in (tq.status or {}).get("conditions", []) if isinstance(c, dict)]


def summary(tq: Hosted, snap: Snapshot) -> dict[str, Any]:
    """The numbers of one TaskQueue: a row of the list page and the head of its own page."""
    obs = snap.observation
    last = _last(snap.points)
    r = rates(last)
    return {
        "namespace": tq.namespace, "name": tq.name,
        "reachable": obs is not None, "error": snap.error,
        "wrong_types": [w.describe() for w in obs.wrong_types] if obs else [],
        "queues": queue_rows(tq, obs),
        "backlog": None if obs is None else obs.queued,
        "oldest": duration(None if obs is None else obs.oldest_task_age),
        "inflight": None if obs is None else obs.in_flight,
        "workers": None if obs is None else obs.live_workers,
        "delayed": None if obs is None else obs.delayed,
        "dead": None if obs is None else obs.dead_letter,
        "arrivals": rate(r["arrivals"]), "completions": rate(r["completions"]),
        "replicas": replicas(tq, last), "conditions": conditions(tq),
    }


def series(tq: Hosted, points: Sequence[tuple[str, history.HistoryPoint]]) -> dict[str, Any]:
    """The charts' data: one x (unix seconds) and the y series, None where unknown."""
    pts = [p for _, p in points]
    per_s = [max(p.dt, 1) / 1000 for p in pts]

    def arrived(p: history.HistoryPoint, seconds: float) -> float | None:
        known = [q.arrived for q in p.queues.values() if q.arrived is not None]
        return sum(known) / seconds if known else None

    return {
        "t": [p.t / 1000 for p in pts],
        "backlog": {printable(q.key): [_queue_backlog(p, q.key) for p in pts]
                    for q in tq.schema.queues},
        "inflight": [p.inflight for p in pts],
        "desired": [p.desired for p in pts],
        "ready": [p.ready for p in pts],
        "arrivals": [arrived(p, s) for p, s in zip(pts, per_s, strict=True)],
        "completions": [None if p.completed is None else p.completed / s
                        for p, s in zip(pts, per_s, strict=True)],
    }


def _queue_backlog(point: history.HistoryPoint, key: str) -> int | None:
    q = point.queues.get(key)
    return None if q is None else q.backlog


def decision_rows(entries: Sequence[tuple[str, history.DecisionEntry]],
                  now: float) -> list[dict[str, Any]]:
    """The decision log, newest first."""
    return [{"age": duration(now - d.t / 1000), "t": d.t, "from": d.previous, "to": d.replicas,
             "recommendation": d.recommendation, "rule": d.rule, "reason": d.reason,
             "backlog": d.backlog, "inflight": d.inflight,
             "quiesced": [printable(p) for p in d.quiesced], "removed": d.removed}
            for _, d in entries]


def worker_rows(obs: QueueObservation | None, held: dict[str, list[keys.Entry | str]],
                now: float, *, progress: dict[str, dict[str, lifecycle.Progress]] | None = None,
                ) -> list[dict[str, Any]]:
    """Each registered worker: heartbeat deadline, alive, quiesced, the tasks it holds with
    their last progress reports (`progress`: worker -> task id -> report)."""
    if obs is None:
        return []
    rows = []
    for w in sorted(obs.workers, key=lambda w: w.worker_id):
        tasks = []
        for entry in held.get(w.worker_id, []):
            if isinstance(entry, str):
                tasks.append({"id": "-", "queue": "-", "age": "-", "attempt": "-",
                              "payload": printable(entry)})
                continue
            task = keys.unwrap(entry.element)
            report = (progress or {}).get(w.worker_id, {}).get(task.id) if task.id else None
            tasks.append({**task_row(Pending(task), now), "queue": printable(entry.queue),
                          "progress": "" if report is None else printable(
                              ui.progress(report, now=now))})
        rows.append({"id": printable(w.worker_id), "alive": w.alive(now=now),
                     "deadline": duration(w.deadline_ms / 1000 - now),
                     "inflight": w.in_flight, "quiesced": w.worker_id in obs.quiesced,
                     "tasks": tasks})
    return rows


def task_row(p: Pending, now: float) -> dict[str, Any]:
    """A queued, delayed or held task as shown."""
    t = p.task
    return {"id": printable(t.id) or "-", "attempt": t.attempts + 1,
            "age": duration(None if t.enqueued_at is None else now - t.enqueued_at),
            "score": p.score, "queue": printable(p.queue),
            "due": "-" if p.score is None else duration(p.score / 1000 - now),
            "payload": printable(t.payload), "problem": t.problem}


def dead_row(record: DeadLetter, now: float) -> dict[str, Any]:
    """A dead-letter record as shown: every text printable, its digest for the action forms."""
    payload = record.payload if record.payload is not None else record.raw
    return {"id": printable(record.id) or "-", "queue": printable(record.queue) or "-",
            "attempts": "?" if record.attempts is None else record.attempts,
            "failed": duration(None if record.failed_at is None else now - record.failed_at),
            "error": printable(record.error), "payload": printable(payload),
            "problems": [printable(p) for p in record.problems], "digest": digest(record)}
