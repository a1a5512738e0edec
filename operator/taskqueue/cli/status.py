"""`taskqueue status ID`: where one task is, by its envelope id (`taskqueue cancel ID`:
`taskqueue.cli.cancel`).

`status` says where the task is in one Redis call (status.lua): queued (which queue), delayed
(due when), running (which worker, since when, which attempt, its last progress report), done,
dead-lettered, cancelled, `cancelling` (a cancel is recorded, the task has not stopped yet) or
unknown. Everything but cancels, idempotency markers and running tasks' progress needs the task
index (spec.worker.tracking, and `enqueue --track` or `client.enqueue(..., track=True)` for
the queued state). `cancel` records the cancel (cancel.lua): a queued or delayed task is never
run, a running one is stopped by its worker within a second; never retried. Exit 1 when the task
had already finished (nothing to cancel).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from taskqueue import client
from taskqueue.cli import ui
from taskqueue.cli.target import Target, target_options
from taskqueue.wire import lifecycle


def render(s: lifecycle.TaskStatus, *, now: float) -> str:
    """The status as `key: value` lines. Pure."""
    lines = [f"task: {s.id}", f"state: {s.state}"]
    if s.queue:
        lines.append(f"queue: {s.queue}")
    if s.since is not None:
        lines.append(f"since: {ui.duration(max(0.0, now - s.since))} ago")
    if s.due is not None and s.state in ("delayed", "cancelling"):
        left = s.due - now
        lines.append(f"due: in {ui.duration(left)}" if left >= 0 else
                     f"due: {ui.duration(-left)} ago (promoted to its queue)")
    if s.worker:
        alive = "" if s.worker_alive else " (heartbeat expired: recovery requeues it)"
        lines.append(f"worker: {s.worker}{alive}")
    if s.attempt is not None:
        lines.append(f"attempt: {s.attempt}")
    if s.progress is not None:
        lines.append(f"progress: {ui.progress(s.progress, now=now)}")
    if s.state == "dead":
        lines.append(f"error: {s.error or '-'}")
        lines += _record_lines(s.record, now=now)
    if not s.tracked and s.state in ("unknown", "cancelling"):
        lines.append("(no task index: spec.worker.tracking is off, or the id is unknown or "
                     "expired)")
    return "\n".join(lines)


PAYLOAD_SHOWN = 200
"""Characters of a dead task's payload `status` prints (--json gives it whole)."""


def _record_lines(record: dict[str, Any] | None, *, now: float) -> list[str]:
    """A dead task's dead-letter record: attempts, failure time, payload. Pure."""
    if record is None:
        return ["(the dead-letter record is in `taskqueue dlq list`)"]
    lines = []
    if record.get("attempts") is not None:
        lines.append(f"attempts: {record['attempts']}")
    failed = record.get("failed_at")
    if isinstance(failed, (int, float)):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(failed))
        lines.append(f"failed at: {stamp} ({ui.duration(max(0.0, now - failed))} ago)")
    payload = str(record.get("payload", ""))
    cut = payload[:PAYLOAD_SHOWN] + (" ..." if len(payload) > PAYLOAD_SHOWN else "")
    lines.append(f"payload: {json.dumps(cut, ensure_ascii=False)}")
    return lines


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("status", parents=target_options(), help=help, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("id", help="the task id (what enqueue printed)")
    p.add_argument("--json", action="store_true", help="the status as one JSON object")
    p.set_defaults(run=run_status)


def run_status(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("status")
    s = client.status_sync(target.connect(), args.id, key_prefix=schema.prefix)
    print(json.dumps(s.as_dict(), ensure_ascii=False) if args.json else
          render(s, now=time.time()))
    return 0
