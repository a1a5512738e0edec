"""`taskqueue inflight`: which worker holds which tasks, and for how long.

Reads the workers zset (heartbeat deadlines) and every `<prefix>:processing:*` list, including
lists of workers no longer registered (orphans: the operator's recovery requeues them). A task's
age is the time since its envelope's enqueue time; a raw payload has none (`-`). A task's
progress is its handler's last `ctx.progress` report, from the worker's
`<prefix>:progress:<worker id>` hash (one HGETALL per worker holding tasks; `-`: none). Entries
are shown whatever they hold: a payload that is not UTF-8 as `\\xNN` (and in base64 in
`--json`), a malformed entry as it is; a processing key of another type as the state
`wrong type: <type>`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import redis

from taskqueue.cli import ui
from taskqueue.cli.records import json_safe, payload_fields, printable, to_bytes
from taskqueue.cli.target import Target, target_options
from taskqueue.wire import keys, lifecycle

_GLOB_SPECIAL = "\\*?[]"


@dataclass(frozen=True)
class HeldTask:
    queue: str
    id: str
    attempts: int
    age_seconds: float | None
    payload: str
    progress: lifecycle.Progress | None = None
    """The handler's last progress report (`ctx.progress`), if any."""


@dataclass(frozen=True)
class WorkerHolding:
    worker: str
    state: str
    """alive, expired (heartbeat deadline passed) or unregistered (an orphan processing list)."""
    heartbeat_in_seconds: float | None
    """Seconds until the heartbeat deadline (negative: overdue); None when unregistered."""
    in_flight: int
    tasks: list[HeldTask]


def glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in _GLOB_SPECIAL else c for c in text)


def held_task(raw: str, *, now: float) -> HeldTask:
    """One processing entry decoded; an unreadable one is shown as it is."""
    try:
        entry = keys.Entry.decode(raw)
    except ValueError:
        return HeldTask(queue="?", id="", attempts=0, age_seconds=None, payload=raw)
    task = keys.unwrap(entry.element)  # never raises: a malformed envelope is shown whole
    age = None
    if task.enqueued_at is not None and math.isfinite(task.enqueued_at):
        age = round(max(0.0, now - task.enqueued_at), 3)
    return HeldTask(queue=entry.queue, id=task.id, attempts=task.attempts, age_seconds=age,
                    payload=task.payload)


def holdings(client: redis.Redis, schema: keys.KeySchema, *, limit: int,
             now: float) -> list[WorkerHolding]:
    """Every registered worker and every processing list, with up to `limit` tasks each."""
    scored: Any = client.zrange(schema.workers, 0, -1, withscores=True)
    deadlines = {str(w): float(s) for w, s in scored}
    pattern = glob_escape(schema.processing_prefix) + "*"
    listed = {str(k)[len(schema.processing_prefix):] for k in client.scan_iter(match=pattern)}
    result = []
    for worker in sorted(set(deadlines) | listed):
        key = to_bytes(schema.processing(worker))
        kind = str(client.type(key))
        if kind not in ("list", "none"):
            result.append(WorkerHolding(worker, f"wrong type: {kind}", None, 0, []))
            continue
        length = int(client.llen(key))
        raw = client.lrange(key, 0, limit - 1) if limit > 0 else []
        entries = with_progress([held_task(str(e), now=now) for e in raw],
                                reports(client, schema.progress(worker)) if raw else {})
        if worker in deadlines:
            left = deadlines[worker] / 1000 - now
            state = "alive" if left >= 0 else "expired"
            # a deadline of +-inf (a member written by hand) has no time to show
            heartbeat: float | None = round(left, 3) if math.isfinite(left) else None
        else:
            state, heartbeat = "unregistered", None
        result.append(WorkerHolding(worker, state, heartbeat, length, entries))
    return result


def reports(client: redis.Redis, key: str) -> dict[str, lifecycle.Progress]:
    """Task id -> last progress report, from a worker's progress hash; {} when the key holds
    another type (not ours to read as one) or a report is unreadable."""
    try:
        raw: Any = client.hgetall(to_bytes(key))
    except redis.ResponseError as exc:
        if "WRONGTYPE" not in str(exc):
            raise
        return {}
    found = {str(k): lifecycle.Progress.decode(str(v)) for k, v in raw.items()}
    return {k: v for k, v in found.items() if v is not None}


def with_progress(tasks: list[HeldTask],
                  found: dict[str, lifecycle.Progress]) -> list[HeldTask]:
    """`tasks`, each with its report from `found` (by task id). Pure."""
    return [dataclasses.replace(t, progress=found.get(t.id)) if t.id in found else t
            for t in tasks]


def as_json(holding: WorkerHolding) -> dict[str, Any]:
    """One worker for `--json`: printable strings, a non-UTF-8 payload's bytes in base64."""
    doc: dict[str, Any] = json_safe(asdict(holding))
    doc["tasks"] = [{**json_safe({k: v for k, v in asdict(t).items() if k != "payload"}),
                     **payload_fields(t.payload)} for t in holding.tasks]
    return doc


def render(found: list[WorkerHolding], *, now: float) -> str:
    if not found:
        return "no workers registered and no tasks in flight"
    rows = []
    for h in found:
        beat = "-" if h.heartbeat_in_seconds is None else (
            f"in {ui.duration(h.heartbeat_in_seconds)}" if h.heartbeat_in_seconds >= 0
            else f"{ui.duration(-h.heartbeat_in_seconds)} ago"
        )
        head = [printable(h.worker), h.state, beat, str(h.in_flight)]
        if not h.tasks:
            rows.append([*head, "-", "-", "-", "-", "-", "-"])
        for i, t in enumerate(h.tasks):
            lead = head if i == 0 else ["", "", "", ""]
            rows.append([*lead, printable(t.queue), printable(t.id) or "-", str(t.attempts),
                         ui.duration(t.age_seconds), ui.preview(printable(
                             ui.progress(t.progress, now=now)), 30),
                         ui.preview(printable(t.payload))])
        if len(h.tasks) < h.in_flight:
            rows.append(["", "", "", "", f"… {h.in_flight - len(h.tasks)} more", "", "", "",
                         "", ""])
    header = ["WORKER", "STATE", "HEARTBEAT", "HOLDS", "QUEUE", "TASK", "ATTEMPTS", "AGE",
              "PROGRESS", "PAYLOAD"]
    return ui.table(header, rows)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("inflight", parents=target_options(), help=help,
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="JSON list of workers and their tasks")
    p.add_argument("--limit", type=int, default=50, help="tasks shown per worker (default 50)")
    p.set_defaults(run=run)


def run(target: Target, args: argparse.Namespace) -> int:
    schema = target.require_schema("inflight")
    now = time.time()
    found = holdings(target.connect(), schema, limit=max(args.limit, 0), now=now)
    if args.json:
        doc: list[dict[str, Any]] = [as_json(h) for h in found]
        print(json.dumps(doc, ensure_ascii=False))
    else:
        print(render(found, now=now))
    return 0
