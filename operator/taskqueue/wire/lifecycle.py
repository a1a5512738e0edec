"""One task's life by id: its status, its cancel, its progress reports. Pure: the KEYS and ARGV
of status.lua and cancel.lua and what their replies mean (the client and the CLI run them; the
worker's side is `taskqueue.worker.lifecycle`). lua/lib/lifecycle.lua is the Lua owner of the
same rules.

A task is known by its envelope id. Where it is, in O(1) Redis reads (status.lua, one call):
- the task index `<prefix>:task:<id>` (spec.worker.tracking: written by the client's enqueue and
  by fetch.lua, fail.lua, cancelled.lua as the task moves: queued, delayed, running, done, dead,
  cancelled), each write renewing its expiry of TRACK_TTL_SECONDS;
- without tracking: the cancels zset, the idempotency done marker and running lease
  (spec.worker.idempotency), and nothing else: such a task is `unknown` until it finishes.
A running task's progress is in its worker's `<prefix>:progress:<worker id>` hash.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from taskqueue.wire import keys

TRACK_TTL_SECONDS = 86400
"""How long a task-index hash lives after its last write (lua/lib/lifecycle.lua TRACK_TTL_MS)."""
CANCEL_KEEP_SECONDS = 7 * 86400
"""How long a cancel is kept for a task not yet taken (a delayed task due later runs)."""
CANCELLED_FIELD = "cancelled"
"""Stats-hash field counting the cancelled tasks (dropped at fetch or stopped while running)."""
STATES = ("queued", "delayed", "running", "done", "dead", "cancelled", "cancelling", "unknown")
"""What `status` answers; "cancelling": a cancel is recorded and the task has not stopped yet."""


@dataclass(frozen=True)
class Progress:
    """A handler's last progress report (`ctx.progress`)."""

    fraction: float | None
    message: str
    at: float
    """Unix seconds of the report."""

    def encode(self) -> str:
        return json.dumps({"fraction": self.fraction, "message": self.message,
                           "at": round(self.at, 3)}, ensure_ascii=False)

    @classmethod
    def decode(cls, text: str) -> Progress | None:
        try:
            data = json.loads(text)
            fraction = data["fraction"]
            return cls(fraction=None if fraction is None else float(fraction),
                       message=str(data["message"]), at=float(data["at"]))
        except (ValueError, KeyError, TypeError):
            return None


def progress_fraction(value: float | None) -> float | None:
    """`value` clamped to [0, 1]; None for none or not a finite number."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if not math.isfinite(number) else min(1.0, max(0.0, number))


@dataclass(frozen=True)
class TaskStatus:
    """Where one task is, as `taskqueue status` and `client.status` say it."""

    id: str
    state: str
    """One of STATES."""
    queue: str = ""
    since: float | None = None
    """Unix seconds the task entered `state` (from the index)."""
    due: float | None = None
    """Delayed: unix seconds it is due."""
    worker: str = ""
    """Running: the worker id holding it."""
    worker_alive: bool | None = None
    """Running: whether that worker's heartbeat deadline is still ahead."""
    attempt: int | None = None
    progress: Progress | None = None
    error: str = ""
    """Dead: the error of its dead-letter record."""
    record: dict[str, Any] | None = None
    """Dead: its dead-letter record as pushed (keys.DEAD_LETTER_FIELDS: queue, payload,
    attempts, error, failed_at, id), kept in the task index with the state."""
    cancel_requested: bool = False
    tracked: bool = False
    """Whether the task index knew the task (spec.worker.tracking)."""

    def as_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "progress"}
        data["progress"] = None if self.progress is None else self.progress.__dict__
        return data


def status_call(schema: keys.KeySchema, task_id: str) -> tuple[list[str], list[str]]:
    """KEYS and ARGV of status.lua for `task_id`."""
    return ([schema.task(task_id), schema.cancels, schema.done(task_id),
             schema.running(task_id), schema.workers],
            [task_id, schema.processing_prefix, schema.progress_prefix])


def cancel_call(schema: keys.KeySchema, task_id: str, *,
                keep_seconds: float = CANCEL_KEEP_SECONDS) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of cancel.lua for `task_id`."""
    return ([schema.cancels, schema.task(task_id)],
            [task_id, int(keep_seconds * 1000), schema.cancel_channel])


@dataclass(frozen=True)
class CancelResult:
    id: str
    recorded: bool
    """False: the task had finished already (`state` says how)."""
    state: str
    """What the index knew before ("" untracked)."""
    workers_told: int


def read_cancel(task_id: str, reply: Any) -> CancelResult:
    state, recorded, told = reply
    return CancelResult(id=task_id, recorded=int(recorded) == 1, state=_text(state),
                        workers_told=int(told))


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _seconds(ms: Any) -> float | None:
    try:
        return None if ms in ("", b"", None) else float(ms) / 1000
    except (TypeError, ValueError):
        return None


def _lease_worker(owner: str) -> str:
    """The worker id of an idempotency lease's owner, `<worker id>#<slot>`. Pure."""
    worker, sep, slot = owner.rpartition("#")
    return worker if sep and worker and slot.isdigit() else owner


def read_status(task_id: str, reply: Any, *, processing_prefix: str) -> TaskStatus:
    """The status.lua `reply` for `task_id` as a TaskStatus. Pure."""
    flat, cancel_ms, done, lease, deadline_ms, progress, now_ms = reply
    index = {_text(flat[i]): _text(flat[i + 1]) for i in range(0, len(flat), 2)}
    cancelled = _seconds(cancel_ms) is not None
    worker = _lease_worker(_text(lease))
    if index.get("state") == "running" and index.get("processing"):
        worker = index["processing"].removeprefix(processing_prefix)
    deadline = _seconds(deadline_ms)
    now = _seconds(now_ms) or 0.0
    state = index.get("state") or ("done" if int(done) else ("running" if worker else "unknown"))
    if cancelled and state in ("queued", "delayed", "running", "unknown"):
        state = "cancelling"
    attempt = index.get("attempt")
    record = _record(index.get("record", "")) if index.get("state") == "dead" else None
    if record is not None:  # what the dead-letter record says is what the task went with
        attempt = str(record.get("attempts", "")) or attempt
        index["queue"] = str(record.get("queue") or index.get("queue", ""))
    return TaskStatus(
        id=task_id, state=state, queue=index.get("queue", ""), since=_seconds(index.get("at")),
        due=_seconds(index.get("due")), worker=worker if index.get("state", "running") in (
            "running",) else "",
        worker_alive=None if not worker else (deadline is not None and deadline > now),
        attempt=int(attempt) if attempt else None,
        progress=Progress.decode(_text(progress)) if progress not in ("", b"") else None,
        error=index.get("error", "") if index.get("state") == "dead" else "",
        record=record, cancel_requested=cancelled, tracked=bool(index))


def _record(text: str) -> dict[str, Any] | None:
    """A dead-letter record (JSON object) from the index; None when absent or unreadable."""
    try:
        decoded = json.loads(text) if text else None
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None
