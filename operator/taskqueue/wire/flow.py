"""Flow control of a TaskQueue's queues in Redis: the fields of the two flow hashes, what the
operator writes from the spec, what `taskqueue pause` writes, and how they read back. Pure.

`<prefix>:flow` (control; `KeySchema.flow`) holds, per queue key:
  - `rate:<queue>` "<tasks> <perSeconds> <burst>" (spec.queues[].rateLimit),
  - `max:<queue>` N (spec.queues[].maxInFlight),
  - `paused:<queue>` "spec" (spec.queues[].paused): the operator's, written from the CR,
  - `paused-cli:<queue>` "<unix seconds> <who>": `taskqueue pause`'s, for an incident.
The operator writes only the first three (`sync_plan`); the CLI only the last. A queue is paused
while either field is there, so the operator never undoes an incident pause and `taskqueue
resume` never undoes the CR (it says so).

`<prefix>:flowstate` (`KeySchema.flow_state`) is the scripts' own (lua/lib/flow.lua):
`tat:<queue>` the rate limit's theoretical arrival time (unix ms) and `held:<queue>` the
queue's tasks in processing lists (only for queues with an in-flight limit).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RATE = "rate:"
MAX = "max:"
PAUSED = "paused:"
PAUSED_CLI = "paused-cli:"
OPERATOR_PREFIXES = (RATE, MAX, PAUSED)
"""The control fields the operator owns (`paused-cli:` starts with none of them)."""
PAUSED_BY_SPEC = "spec"
TAT = "tat:"
HELD = "held:"


@dataclass(frozen=True)
class QueueFlow:
    """The flow control of one queue as declared (the spec) or as read back (Redis)."""

    key: str
    rate: tuple[int, float, int] | None = None
    """(tasks, perSeconds, burst)."""
    max_in_flight: int | None = None
    paused: bool = False
    """spec.queues[].paused."""
    paused_cli: str | None = None
    """`taskqueue pause`'s record ("<unix seconds> <who>"), read back only."""
    held: int | None = None
    """Tasks of the queue in processing lists (read back; queues with maxInFlight)."""

    @property
    def per_second(self) -> float | None:
        return None if self.rate is None else self.rate[0] / self.rate[1]

    @property
    def is_paused(self) -> bool:
        return self.paused or self.paused_cli is not None

    @property
    def limited(self) -> bool:
        return self.rate is not None or self.max_in_flight is not None or self.is_paused


def declared(spec_queues: Sequence[Any]) -> tuple[QueueFlow, ...]:
    """The flow control spec.queues declares (`models.QueueSpec`s, which this module cannot
    import: the worker starts without pydantic)."""
    return tuple(QueueFlow(
        key=q.key,
        rate=(None if q.rateLimit is None else
              (q.rateLimit.tasks, q.rateLimit.perSeconds, q.rateLimit.bucket)),
        max_in_flight=q.maxInFlight, paused=q.paused) for q in spec_queues)


def rate_text(tasks: int, per_seconds: float, burst: int) -> str:
    """The `rate:` value lua/lib/flow.lua `flow_rate` reads."""
    return f"{tasks} {per_seconds:g} {burst}"


def control_fields(queues: Sequence[QueueFlow]) -> dict[str, str]:
    """The operator's fields of the control hash for `queues` as declared."""
    fields: dict[str, str] = {}
    for q in queues:
        if q.rate is not None:
            fields[RATE + q.key] = rate_text(*q.rate)
        if q.max_in_flight is not None:
            fields[MAX + q.key] = str(q.max_in_flight)
        if q.paused:
            fields[PAUSED + q.key] = PAUSED_BY_SPEC
    return fields


def sync_plan(desired: Mapping[str, str],
              current: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The fields to set and to delete so that the operator's part of the control hash
    (`current`, the whole hash as read) is `desired`; `paused-cli:` fields are never touched."""
    to_set = {f: v for f, v in desired.items() if current.get(f) != v}
    to_delete = sorted(f for f in current
                       if f.startswith(OPERATOR_PREFIXES) and not f.startswith(PAUSED_CLI)
                       and f not in desired)
    return to_set, to_delete


def pause_record(*, at: float, who: str) -> str:
    """The `paused-cli:` value: when and by whom (one word)."""
    return f"{at:.0f} {who.split()[0] if who.split() else '?'}"


def read(queue_keys: Sequence[str], control: Mapping[str, str],
         state: Mapping[str, str]) -> tuple[QueueFlow, ...]:
    """Each queue's flow control as the two hashes hold it (unreadable values are left out)."""
    return tuple(_read_one(k, control, state) for k in queue_keys)


def _read_one(key: str, control: Mapping[str, str], state: Mapping[str, str]) -> QueueFlow:
    return QueueFlow(
        key=key, rate=parse_rate(control.get(RATE + key)),
        max_in_flight=_int(control.get(MAX + key)),
        paused=PAUSED + key in control, paused_cli=control.get(PAUSED_CLI + key),
        held=_int(state.get(HELD + key)))


def parse_rate(text: str | None) -> tuple[int, float, int] | None:
    """(tasks, perSeconds, burst) of a `rate:` value; None when absent or unreadable (the
    script then applies no rate limit either)."""
    parts = (text or "").split()
    if len(parts) != 3:
        return None
    try:
        tasks, per, burst = int(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        return None
    if tasks < 1 or per <= 0 or burst < 1:
        return None
    return tasks, per, burst


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None
