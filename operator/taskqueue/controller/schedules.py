"""The schedules of one TaskQueue in a poll: which slots to fire, what Redis said, the status.
Pure: the one call to Redis (fire.lua, `Scheduler.fire` in `taskqueue.controller.act`) is built
and read here.

Each poll sends, per schedule, the slots from the last slot accounted (`through`, kept in Redis
and read back by every call) to the end of the fire-ahead horizon (the next poll plus pod
start-up, `policy.due_horizon`, plus a second: `fire_horizon`): their tasks wait in the delayed
zset and the workers' promoter starts them on time even when the operator is slow or down at
that moment; the scaler counts them as demand (delayed tasks due within the horizon). An
overlap Skip schedule fires a slot only once it is due, since whether the previous task is still
around is known only then.
After a gap (operator downtime), the slots within `catchUpSeconds` are fired, the older ones
counted as missed. fire.lua fires each slot once whatever the callers (docs/operator.md,
"Schedules").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from taskqueue.api import schedulespec
from taskqueue.api.models import ScheduleSpec, TaskQueueSpec
from taskqueue.api.statusschema import ScheduleStatus
from taskqueue.wire import keys

MAX_SLOTS_PER_CALL = 1000
"""Slots of one schedule fired by one call; the rest go with the next poll."""
MAX_MISSED_PER_CALL = 100_000
"""Missed slots of one schedule counted by one call (a long gap is counted over several polls)."""
OVERLAP_CHECKS = 8
"""Attempt counts of the previous task that overlap Skip looks for (retried up to 7 times)."""
FIRED_KEY_MARGIN_SECONDS = 600.0
FIRE_MARGIN_SECONDS = 1.0
"""Fired this much further ahead than the scaler's horizon: a slot at the horizon's edge would
otherwise be fired by a poll that ran late just after the slot, or reach the delayed zset while
the workers' promoter sleeps its longest (0.25 s) and start that much late."""


@dataclass(frozen=True)
class Slot:
    slot_ms: int
    due_ms: int
    queue_index: int
    element: str
    task_id: str


@dataclass(frozen=True)
class Plan:
    """One schedule's part of a fire.lua call."""

    name: str
    seen: int | None
    init_ms: int
    through_ms: int
    missed: int
    skip: bool
    ttl_ms: int
    slots: tuple[Slot, ...]


@dataclass(frozen=True)
class Fired:
    """One schedule after a fire.lua call (Redis's view, the same for every operator)."""

    name: str
    stale: bool
    """The call did nothing for it: `through` was not what the caller had read."""
    through_ms: int | None
    last_slot_ms: int | None
    last_task_id: str | None
    missed: int
    skipped: int
    letters: str
    """Per slot sent: F fired, D already fired, S skipped."""
    missed_now: int = 0
    """Slots this call counted as missed."""


def _slot(schedule: ScheduleSpec, schema: keys.KeySchema, slot: float) -> Slot:
    tid = schedulespec.task_id(schedule, slot)
    return Slot(round(slot * 1000), schedulespec.due_ms(schedule, slot),
                schema.queue_keys.index(schedule.queue) + 1,
                keys.wrap(schedule.payload, attempts=0, task_id=tid, enqueued_at=slot), tid)


def plan_one(schedule: ScheduleSpec, schema: keys.KeySchema, *, seen: int | None, now: float,
             horizon: float) -> Plan:
    """What one call does for `schedule`, after the caller last read `seen` (None: not read)."""
    end = now if schedule.overlap == "Skip" else now + horizon
    ttl = int((2 * (schedule.catchUpSeconds + horizon) + FIRED_KEY_MARGIN_SECONDS) * 1000)
    now_ms = int(now * 1000)
    after = now if seen is None else seen / 1000
    start = max(after, now - schedule.catchUpSeconds - 0.001)
    missed = 0
    if seen is not None and start > after:
        missed = sum(1 for _ in schedulespec.slots(schedule, after=after, until=start,
                                                   limit=MAX_MISSED_PER_CALL))
    if missed >= MAX_MISSED_PER_CALL:  # a long gap: count part of it now, the rest next poll
        last = list(schedulespec.slots(schedule, after=after, until=start,
                                       limit=MAX_MISSED_PER_CALL))[-1]
        return Plan(schedule.name, seen, now_ms, round(last * 1000), missed, False, ttl, ())
    if schedule.suspend:  # up to now only: a slot of the horizon fires if resumed before it
        return Plan(schedule.name, seen, now_ms, max(now_ms, seen or 0), 0, False, ttl, ())
    found = list(schedulespec.slots(schedule, after=start, until=end, limit=MAX_SLOTS_PER_CALL))
    through = int(end * 1000) if len(found) < MAX_SLOTS_PER_CALL else round(found[-1] * 1000)
    return Plan(schedule.name, seen, now_ms, max(through, seen or 0), missed,
                schedule.overlap == "Skip", ttl,
                tuple(_slot(schedule, schema, s) for s in found))


def fire_horizon(due_horizon: float) -> float:
    """Seconds ahead a poll fires slots: the scaler's horizon (`policy.due_horizon`: the next
    poll plus pod start-up) plus `FIRE_MARGIN_SECONDS`."""
    return due_horizon + FIRE_MARGIN_SECONDS


def plan(spec: TaskQueueSpec, schema: keys.KeySchema, *, seen: Mapping[str, int | None],
         now: float, horizon: float) -> list[Plan]:
    """The call of one poll: every schedule of `spec`."""
    return [plan_one(s, schema, seen=seen.get(s.name), now=now, horizon=horizon)
            for s in spec.schedules]


def call(schema: keys.KeySchema, plans: Sequence[Plan]) -> tuple[list[str], list[str | int]]:
    """KEYS and ARGV of fire.lua for `plans`."""
    keys_: list[str] = [schema.schedules, schema.delayed, schema.workers, *schema.queue_keys]
    args: list[str | int] = [len(schema.queues), *schema.queue_types, len(plans)]
    for p in plans:
        args += [p.name, "" if p.seen is None else p.seen, p.init_ms, p.through_ms, p.missed,
                 "1" if p.skip else "0", OVERLAP_CHECKS, p.ttl_ms, len(p.slots)]
        for s in p.slots:
            args += [s.slot_ms, s.due_ms, s.queue_index, s.element, s.task_id]
            keys_.append(schema.fired(s.task_id))
    return keys_, args


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _int(value: object) -> int | None:
    text = _text(value)
    return int(text) if text else None


def parse(reply: Sequence[Sequence[object]], plans: Sequence[Plan]) -> list[Fired]:
    """fire.lua's reply, one `Fired` per plan."""
    out = []
    for row, p in zip(reply, plans, strict=True):
        name, state, through, slot, tid, missed, skipped, letters = (_text(v) for v in row)
        assert name == p.name
        stale = state != "ok"
        out.append(Fired(name, stale, _int(through), _int(slot), tid or None,
                         _int(missed) or 0, _int(skipped) or 0, letters,
                         0 if stale or p.seen is None else p.missed))
    return out


def seen_after(fired: Sequence[Fired]) -> dict[str, int | None]:
    """What the next call names as read (`through` as Redis holds it now)."""
    return {f.name: f.through_ms for f in fired}


@dataclass(frozen=True)
class Notice:
    """An Event to post: a skipped or missed slot."""

    reason: str
    message: str


def notices(spec: TaskQueueSpec, fired: Sequence[Fired]) -> list[Notice]:
    """One Event per skipped slot and one per call that counted missed slots."""
    by_name = {s.name: s for s in spec.schedules}
    out: list[Notice] = []
    for f in fired:
        schedule = by_name.get(f.name)
        if schedule is None or f.stale:
            continue
        for n in range(f.letters.count("S")):
            out.append(Notice("ScheduleSkipped", f"schedule {f.name}: a slot was skipped "
                              f"(overlap Skip: the previous task {f.last_task_id} is still "
                              f"queued, delayed or running; {f.skipped - n} skipped in all)"))
        if f.missed_now:
            out.append(Notice("ScheduleMissed", f"schedule {f.name}: {f.missed_now} slot(s) "
                              f"older than catchUpSeconds={schedule.catchUpSeconds:g} were not "
                              f"fired (operator down or Redis unreachable); {f.missed} missed "
                              "in all"))
    return out


def _iso(ms: int | None) -> str | None:
    return None if ms is None else schedulespec.slot_text(ms / 1000)


def status(spec: TaskQueueSpec, fired: Mapping[str, Fired], *, now: float) -> dict[str, object]:
    """`status.schedules` and `status.nextScheduleTime` (None: removed, no schedules)."""
    if not spec.schedules:
        return {"schedules": None, "nextScheduleTime": None}
    out: dict[str, dict[str, object]] = {}
    nexts: list[float] = []
    for s in spec.schedules:
        f = fired.get(s.name)
        upcoming = None if s.suspend else next(iter(schedulespec.next_slots(s, after=now,
                                                                            count=1)), None)
        if upcoming is not None:
            nexts.append(upcoming)
        out[s.name] = ScheduleStatus(
            lastSlotTime=_iso(f.last_slot_ms if f else None),
            lastTaskId=f.last_task_id if f else None,
            nextSlotTime=None if upcoming is None else schedulespec.slot_text(upcoming),
            missed=f.missed if f else 0, skipped=f.skipped if f else 0,
            suspended=s.suspend).model_dump(exclude_none=True)
    return {"schedules": out,
            "nextScheduleTime": schedulespec.slot_text(min(nexts)) if nexts else None}
