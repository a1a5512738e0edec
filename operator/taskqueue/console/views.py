"""What the pages show, computed from a snapshot and the spec: plain dicts the templates and the
JSON refresh render. Pure: no I/O, every text of Redis through `printable` (the templates escape
it; bytes that are not UTF-8 show as `\\xNN`).

Each concept is one function feeding one template partial (`templates/partials/`): the
queues table with each queue's flow control, the replicas, the rates, the chart series, the
decision log, the schedules, the workers with their tasks' progress, a task, a dead letter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from taskqueue.api import schedulespec
from taskqueue.api.schedulespec import ScheduleSpec
from taskqueue.cli.records import DeadLetter, printable
from taskqueue.console.live import Snapshot
from taskqueue.console.reads import Held, Pending, digest
from taskqueue.scaling import waits
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import flow, history, keys, lifecycle


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
    schedules: tuple[ScheduleSpec, ...] = ()
    """spec.schedules."""
    heartbeat_seconds: float | None = None
    """spec.worker.heartbeatSeconds (None: no spec read): a worker's deadline is its last beat
    plus `keys.HEARTBEAT_DEADLINE_PERIODS` of them."""

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


def queue_rows(tq: Hosted, obs: QueueObservation | None,
               flows: Sequence[flow.QueueFlow] = ()) -> list[dict[str, Any]]:
    """Per queue: backlog, oldest task, p95 wait against its target, its flow control."""
    by_key = {f.key: f for f in flows}
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
            **flow_cells(by_key.get(q.key), now=None if obs is None else obs.at),
        })
    return rows


def flow_cells(f: flow.QueueFlow | None, *, now: float | None) -> dict[str, Any]:
    """A queue's flow control as shown: its rate limit, its in-flight count against its limit,
    and who paused it (spec.queues[].paused, `taskqueue pause`: when and by whom)."""
    if f is None:
        return {"rate": "-", "max": "-", "paused": "", "paused_cli": False}
    rate_text = "-" if f.rate is None else (
        f"{f.rate[0]} per {f.rate[1]:g}s (burst {f.rate[2]})")
    held = "?" if f.held is None else str(f.held)
    paused = []
    if f.paused:
        paused.append("paused by spec.queues[].paused")
    if f.paused_cli is not None:
        at, _, who = f.paused_cli.partition(" ")
        try:
            ago = duration(None if now is None else now - float(at))
        except ValueError:
            ago = "-"
        paused.append(f"paused by `taskqueue pause` ({printable(who) or '?'}, {ago} ago)")
    return {"rate": rate_text,
            "max": "-" if f.max_in_flight is None else f"{held} / {f.max_in_flight}",
            "paused": "; ".join(paused), "paused_cli": f.paused_cli is not None}


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
        "queues": queue_rows(tq, obs, snap.flows), "flow_error": snap.flow_error,
        "paused": [printable(q.key) for q in snap.flows if q.is_paused],
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


@dataclass(frozen=True)
class WorkerPage:
    """One page of the workers table: which workers, and where it is among the pages."""

    ids: tuple[str, ...]
    page: int
    pages: int
    total: int
    first: int
    """Index of the page's first worker (0-based)."""

    def as_dict(self) -> dict[str, Any]:
        return {"page": self.page, "pages": self.pages, "total": self.total,
                "first": self.first + 1 if self.ids else 0, "last": self.first + len(self.ids),
                "more": self.total - self.first - len(self.ids)}


def worker_page(obs: QueueObservation | None, page: int, size: int) -> WorkerPage:
    """Page `page` (0-based; past the end: the last) of the registered workers, ordered by id."""
    ids = sorted(w.worker_id for w in obs.workers) if obs is not None else []
    pages = max(1, -(-len(ids) // size))
    page = min(max(0, page), pages - 1)
    return WorkerPage(tuple(ids[page * size:(page + 1) * size]), page, pages, len(ids),
                      page * size)


def worker_rows(obs: QueueObservation | None, held: Held, now: float,
                heartbeat_seconds: float | None = None,
                only: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Each registered worker (or those of `only`, one page): its last heartbeat's age (known
    with the spec's period: the deadline is the beat plus HEARTBEAT_DEADLINE_PERIODS periods),
    its deadline, alive, quiesced, the tasks it holds with their last progress report."""
    if obs is None:
        return []
    rows = []
    shown = None if only is None else set(only)
    for w in sorted(obs.workers, key=lambda w: w.worker_id):
        if shown is not None and w.worker_id not in shown:
            continue
        reports = held.progress.get(w.worker_id, {})
        tasks = []
        for entry in held.entries.get(w.worker_id, []):
            if isinstance(entry, str):
                tasks.append({"id": "-", "queue": "-", "age": "-", "attempt": "-",
                              "payload": printable(entry), **progress_cells(None, now)})
                continue
            task = keys.unwrap(entry.element)
            tasks.append({**task_row(Pending(task), now), "queue": printable(entry.queue),
                          **progress_cells(reports.get(task.id or ""), now)})
        left = w.deadline_ms / 1000 - now
        rows.append({"id": printable(w.worker_id), "alive": w.alive(now=now),
                     "deadline": duration(left),
                     "beat": "-" if heartbeat_seconds is None else duration(
                         keys.HEARTBEAT_DEADLINE_PERIODS * heartbeat_seconds - left),
                     "inflight": w.in_flight, "quiesced": w.worker_id in obs.quiesced,
                     "tasks": tasks})
    return rows


def progress_cells(report: lifecycle.Progress | None, now: float) -> dict[str, Any]:
    """A running task's last `ctx.progress` report: percent (None: no fraction given), its
    message, how long ago; `progress` False when the handler has reported none."""
    if report is None:
        return {"progress": False, "percent": None, "message": "", "reported": "-"}
    return {"progress": True,
            "percent": None if report.fraction is None else round(100 * report.fraction),
            "message": printable(report.message), "reported": duration(now - report.at)}


class NextSlots:
    """The next slot of each schedule after a time, remembered: the slot after `t` is also the
    slot after any later time before it, so a page refresh computes a cron expression again
    only once its slot has passed (a TaskQueue has up to 64 schedules; cron in a time zone
    costs a fraction of a millisecond each)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, ...], tuple[float, float | None]] = {}

    def after(self, schedule: ScheduleSpec, t: float, *, key: str) -> float | None:
        """The first slot of `schedule` after `t`; `key` names the caller's series of times
        (the TaskQueue and which time it follows)."""
        name = (key, schedule.name, schedule.cron, schedule.timeZone)
        held = self._held.get(name)
        if held is not None and held[0] <= t and (held[1] is None or t < held[1]):
            return held[1]
        found = next(iter(schedulespec.next_slots(schedule, after=t, count=1)), None)
        self._held[name] = (t, found)
        return found


def schedule_rows(tq: Hosted, fired: dict[str, dict[str, str]], now: float,
                  slots: NextSlots | None = None) -> list[dict[str, Any]]:
    """Each schedule of the spec with what Redis records of its firing: the next slot, the
    last slot fired and its task (the operator fires slots up to its horizon ahead of time:
    the last one fired may be to come), the lateness (a due slot not yet fired: the operator is
    down or behind), the slots missed (older than catchUpSeconds) and skipped (refused by
    overlap Skip)."""
    slots = slots or NextSlots()
    rows = []
    for sc in tq.schedules:
        record = fired.get(sc.name, {})
        through = _ms(record.get("through"))
        slot = _ms(record.get("slot"))
        upcoming = None if sc.suspend else slots.after(sc, now, key=tq.ref + " now")
        overdue = None
        if through is not None and not sc.suspend:
            first = slots.after(sc, through / 1000, key=tq.ref + " through")
            overdue = first if first is not None and first <= now else None
        rows.append({
            "name": sc.name, "cron": sc.cron, "zone": sc.timeZone, "queue": printable(sc.queue),
            "overlap": sc.overlap, "suspended": sc.suspend,
            "next": "-" if upcoming is None else schedulespec.slot_text(upcoming),
            "next_in": duration(None if upcoming is None else upcoming - now),
            "last": "-" if slot is None else schedulespec.slot_text(slot / 1000),
            "last_when": "-" if slot is None else _relative(slot / 1000 - now),
            "last_task": printable(record.get("id", "")) or "-",
            "late": None if overdue is None else duration(now - overdue),
            "missed": _ms(record.get("missed")) or 0,
            "skipped": _ms(record.get("skipped")) or 0,
            "known": bool(record),
        })
    return rows


def _relative(seconds: float) -> str:
    """`in 4.2s` ahead, `4.2s ago` behind (fire.lua fires slots ahead of time)."""
    return f"in {duration(seconds)}" if seconds > 0 else f"{duration(-seconds)} ago"


def _ms(text: str | None) -> int | None:
    try:
        return None if text in (None, "") else int(str(text))
    except ValueError:
        return None


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
