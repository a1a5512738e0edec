"""The history and the decision log of a TaskQueue in Redis: their field names, their entries as
dataclasses, the stream fields of each (`fields`, `decode`) and the reading of XRANGE replies
(`decisions`, `points`). Pure: no client.

Two streams under the TaskQueue's key prefix (`KeySchema.decisions`, `KeySchema.history`), written
by one writer, the operator's poller, and read by the console and `taskqueue simulate`;
docs/contracts.md is their contract. Every value is a string, as Redis stores it; an empty one
means unknown. Each entry of a stream carries the same fields in the same order, so a stream
stores the names once per listpack node (4 KB by default); so that a node holds many entries even
for a TaskQueue of many queues, a history point has one field per queue, `q:<queue key>`, whose
value is the queue's numbers in QUEUE_FIELDS order, space-separated, "-" for unknown (a field per
number and queue would take 8.5 KB a point for 32 queues instead of 1.9 KB:
bench/operator/history_memory.py).
Readers ignore the fields they do not know and the numbers after those they know: a field or a
number is added at the end, never renamed or given another meaning.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

DECISION_FIELDS = ("t", "from", "to", "recommendation", "rule", "reason", "backlog", "inflight",
                   "quiesced", "removed")
"""The fields of a decision-log entry, in the order they are written."""
POINT_FIELDS = ("t", "dt", "desired", "replicas", "ready", "inflight", "workers", "completed",
                "failed")
"""The TaskQueue-wide fields of a history point, in order; the per-queue ones follow."""
QUEUE_FIELDS = ("backlog", "arrived", "attempts", "service_ms", "service_sq_ms2", "oldest_ms",
                "p95_wait_ms")
"""The numbers of a queue in a history point, in the order its field `q:<queue key>` holds them."""
QUEUE_PREFIX = "q:"
"""A history point's field of one queue is this, then the queue key (one per queue, in the order
of spec.queues, after POINT_FIELDS)."""
UNKNOWN = "-"
"""An unknown number in a queue's field."""


@dataclass(frozen=True)
class Append:
    """One XADD: `fields` to stream `key`, trimmed to about `maxlen` entries (MAXLEN ~)."""

    key: str
    fields: dict[str, str]
    maxlen: int


@dataclass(frozen=True)
class DecisionEntry:
    """One change of the operator's decision: of the replica count it sets, of the rule that
    decides it, or of the pods it keeps quiesced."""

    t: int
    """The operator's clock at the poll (unix ms)."""
    previous: int
    """Field `from`: the replica count before the poll."""
    replicas: int
    """Field `to`: the replica count the poll set."""
    recommendation: int
    """The policy's recommendation before the scale-down window and the steps."""
    rule: str
    """The rule that decided `replicas` (`taskqueue.scaling.policy.Rule`)."""
    reason: str
    """The sentence the status shows."""
    backlog: int | None = None
    """Tasks queued in all queues (None: Redis could not be read)."""
    inflight: int | None = None
    """Tasks held by workers (None: Redis could not be read)."""
    quiesced: tuple[str, ...] = ()
    """The pods quiesced after the poll, sorted."""
    removed: int = 0
    """How many replicas the count dropped by (0 unless it dropped)."""

    def fields(self) -> dict[str, str]:
        """The entry as stream fields, in DECISION_FIELDS order."""
        return {"t": str(self.t), "from": str(self.previous), "to": str(self.replicas),
                "recommendation": str(self.recommendation), "rule": self.rule,
                "reason": self.reason, "backlog": _text(self.backlog),
                "inflight": _text(self.inflight), "quiesced": " ".join(self.quiesced),
                "removed": str(self.removed)}

    @classmethod
    def decode(cls, raw: Mapping[Any, Any]) -> DecisionEntry:
        """The entry in stream fields `raw` (str or bytes); ValueError naming a missing or
        malformed field. Unknown fields are ignored."""
        got = _strings(raw)
        return cls(t=_int(got, "t"), previous=_int(got, "from"), replicas=_int(got, "to"),
                   recommendation=_int(got, "recommendation"), rule=_str(got, "rule"),
                   reason=_str(got, "reason"), backlog=_optional(got, "backlog"),
                   inflight=_optional(got, "inflight"),
                   quiesced=tuple(got.get("quiesced", "").split()),
                   removed=_int(got, "removed"))


@dataclass(frozen=True)
class QueuePoint:
    """One queue over one history interval."""

    backlog: int | None = None
    """Tasks queued at the interval's end."""
    arrived: int | None = None
    """Tasks that arrived in the interval (the estimate the policy's rates use:
    `taskqueue.scaling.arrivals.entered`)."""
    attempts: int | None = None
    """Attempts that ended in the interval as the workers reported them (completed or failed;
    the count `service_ms` sums over)."""
    service_ms: int | None = None
    """The sum of those attempts' times (ms)."""
    service_sq_ms2: int | None = None
    """The sum of their squares (ms^2; None when some worker does not report squares)."""
    oldest_ms: int | None = None
    """Age of the oldest queued task at the interval's end (None: empty, or no enqueue time)."""
    p95_wait_ms: int | None = None
    """The p95 wait of the tasks the workers measured in the interval (None: none measured)."""


@dataclass(frozen=True)
class HistoryPoint:
    """A TaskQueue over one history interval (`spec.history.intervalSeconds`)."""

    t: int
    """The interval's end: the time of the observation that closed it (unix ms)."""
    dt: int
    """The interval's real length (ms): since the previous point."""
    desired: int
    """The replica count the operator set."""
    replicas: int
    """The Deployment's pods (status.replicas)."""
    ready: int
    """Its ready pods."""
    inflight: int
    """Tasks held by workers at the end."""
    workers: int
    """Workers with a live heartbeat at the end."""
    completed: int | None = None
    """Tasks completed in the interval (all queues: the workers count completions per TaskQueue)."""
    failed: int | None = None
    """Attempts failed in the interval (all queues)."""
    queues: dict[str, QueuePoint] = field(default_factory=dict)
    """Per queue key, in the order of spec.queues."""

    def fields(self) -> dict[str, str]:
        """The point as stream fields: POINT_FIELDS, then `q:<queue key>` per queue."""
        out = {"t": str(self.t), "dt": str(self.dt), "desired": str(self.desired),
               "replicas": str(self.replicas), "ready": str(self.ready),
               "inflight": str(self.inflight), "workers": str(self.workers),
               "completed": _text(self.completed), "failed": _text(self.failed)}
        for queue, point in self.queues.items():
            out[QUEUE_PREFIX + queue] = " ".join(
                UNKNOWN if (v := getattr(point, name)) is None else str(v)
                for name in QUEUE_FIELDS)
        return out

    @classmethod
    def decode(cls, raw: Mapping[Any, Any]) -> HistoryPoint:
        """The point in stream fields `raw` (str or bytes); ValueError naming a missing or
        malformed field. Unknown fields, and numbers after QUEUE_FIELDS, are ignored."""
        got = _strings(raw)
        queues = {name.removeprefix(QUEUE_PREFIX): _queue_point(name, value)
                  for name, value in got.items() if name.startswith(QUEUE_PREFIX)}
        return cls(t=_int(got, "t"), dt=_int(got, "dt"), desired=_int(got, "desired"),
                   replicas=_int(got, "replicas"), ready=_int(got, "ready"),
                   inflight=_int(got, "inflight"), workers=_int(got, "workers"),
                   completed=_optional(got, "completed"), failed=_optional(got, "failed"),
                   queues=queues)


def _queue_point(name: str, value: str) -> QueuePoint:
    """A queue's numbers from its field `name` (missing ones at the end are unknown)."""
    tokens = value.split(" ")[:len(QUEUE_FIELDS)]
    numbers = [None if token == UNKNOWN else _optional({name: token}, name) for token in tokens]
    return QueuePoint(*numbers)


def decisions(reply: Iterable[Sequence[Any]]) -> list[tuple[str, DecisionEntry]]:
    """An XRANGE (or XREVRANGE) reply of the decision log as (stream id, entry) pairs."""
    return [(_decoded(entry_id), DecisionEntry.decode(_mapping(raw))) for entry_id, raw in reply]


def points(reply: Iterable[Sequence[Any]]) -> list[tuple[str, HistoryPoint]]:
    """An XRANGE (or XREVRANGE) reply of the history as (stream id, point) pairs."""
    return [(_decoded(entry_id), HistoryPoint.decode(_mapping(raw))) for entry_id, raw in reply]


def _text(value: int | None) -> str:
    return "" if value is None else str(value)


def _decoded(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mapping(raw: Any) -> Mapping[Any, Any]:
    """A stream entry's fields: a mapping (redis-py) or a flat [name, value, ...] list (RESP)."""
    if isinstance(raw, Mapping):
        return raw
    flat = list(raw)
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _strings(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {_decoded(k): _decoded(v) for k, v in raw.items()}


def _str(got: Mapping[str, str], name: str) -> str:
    if name not in got:
        raise ValueError(f"stream entry without field {name!r}")
    return got[name]


def _int(got: Mapping[str, str], name: str) -> int:
    value = _optional(got, name)
    if value is None:
        raise ValueError(f"stream entry field {name!r} is empty: a whole number is required")
    return value


def _optional(got: Mapping[str, str], name: str) -> int | None:
    text = _str(got, name)
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"stream entry field {name!r} is {text!r}, not a whole number") from None
