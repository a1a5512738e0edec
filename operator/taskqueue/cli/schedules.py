"""`taskqueue schedules [-f M | --name N]`: the next slots of each schedule of a TaskQueue, in
its time zone and in UTC, and what Redis records of its firing (last slot, missed, skipped).

The slots come from the spec alone (`taskqueue.api.schedulespec`, the operator's own rule,
daylight saving time included); `--no-redis` skips the Redis read.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from typing import Any

import redis

from taskqueue.api import schedulespec
from taskqueue.api.models import ScheduleSpec
from taskqueue.cli import ui
from taskqueue.cli.errors import EXIT_USAGE, CliError
from taskqueue.cli.target import Target, target_options


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser], *, help: str) -> None:
    p = sub.add_parser("schedules", parents=target_options(), help=help,
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--count", type=int, default=5, help="slots shown per schedule (default 5)")
    p.add_argument("--schedule", default=None, help="only the schedule of this name")
    p.add_argument("--json", action="store_true", help="one JSON object per schedule")
    p.add_argument("--no-redis", action="store_true",
                   help="do not read the firing record from Redis")
    p.set_defaults(run=run)


def local_text(schedule: ScheduleSpec, slot: float) -> str:
    """`slot` as a wall time of the schedule's zone with its offset."""
    return datetime.datetime.fromtimestamp(slot, schedule.zone).strftime("%Y-%m-%d %H:%M:%S%z")


def describe(schedule: ScheduleSpec, *, now: float, count: int,
             fired: dict[str, str]) -> dict[str, Any]:
    """One schedule: its settings, next `count` slots, and the firing record `fired` (fields of
    the schedules hash for this schedule, without the name)."""
    slots = [] if schedule.suspend else schedulespec.next_slots(schedule, after=now, count=count)
    return {
        "name": schedule.name, "cron": schedule.cron, "timeZone": schedule.timeZone,
        "queue": schedule.queue, "overlap": schedule.overlap, "suspend": schedule.suspend,
        "next": [{"local": local_text(schedule, t), "utc": schedulespec.slot_text(t),
                  "taskId": schedulespec.task_id(schedule, t)} for t in slots],
        "lastSlot": schedulespec.slot_text(int(fired["slot"]) / 1000) if fired.get("slot")
        else None,
        "lastTaskId": fired.get("id"), "missed": int(fired.get("missed") or 0),
        "skipped": int(fired.get("skipped") or 0),
    }


def render(described: list[dict[str, Any]]) -> str:
    out = []
    for d in described:
        head = (f"{d['name']}: {d['cron']!r} in {d['timeZone']} -> {d['queue']} "
                f"(overlap {d['overlap']}{', SUSPENDED' if d['suspend'] else ''}); last "
                f"{d['lastSlot'] or '-'}, missed {d['missed']}, skipped {d['skipped']}")
        rows = [[n["local"], n["utc"], n["taskId"]] for n in d["next"]]
        out.append(head + "\n" + (ui.table(["local", "UTC", "task id"], rows) if rows
                                  else "  (no slot)"))
    return "\n\n".join(out) if out else "no schedules in spec.schedules"


def _records(target: Target, names: list[str]) -> dict[str, dict[str, str]]:
    if target.schema is None or not names:
        return {}
    fields = ("slot", "id", "missed", "skipped")
    got = [None if v is None else str(v) for v in target.connect().hmget(
        target.schema.schedules, [f"{f}:{n}" for n in names for f in fields])]
    out: dict[str, dict[str, str]] = {}
    for i, n in enumerate(names):
        values = got[i * len(fields):(i + 1) * len(fields)]
        out[n] = {f: v for f, v in zip(fields, values, strict=True) if v is not None}
    return out


def run(target: Target, args: argparse.Namespace) -> int:
    if target.spec is None:
        raise CliError("schedules needs a TaskQueue spec: pass -f FILE or --name NAME",
                       EXIT_USAGE)
    chosen = [s for s in target.spec.schedules if args.schedule in (None, s.name)]
    if args.schedule is not None and not chosen:
        raise CliError(f"no schedule named {args.schedule!r} in spec.schedules (names: "
                       f"{', '.join(s.name for s in target.spec.schedules) or 'none'})",
                       EXIT_USAGE)
    try:
        records = {} if args.no_redis else _records(target, [s.name for s in chosen])
    except (redis.ConnectionError, redis.TimeoutError):
        records = {}  # the slots need no Redis; the record is left out
    now = time.time()
    described = [describe(s, now=now, count=max(args.count, 0), fired=records.get(s.name, {}))
                 for s in chosen]
    if args.json:
        for d in described:
            print(json.dumps(d))
    else:
        print(render(described))
    return 0
