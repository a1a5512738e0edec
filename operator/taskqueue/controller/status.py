"""A TaskQueue's status: built here, and only here, for every status write. Pure (no I/O).

- `build_status`: the status after a poll (counts, replicas, conditions).
- `with_writes`: conditions FlowControlWritten and SchedulesFired, the poll's own writes to Redis
  (the spec's flow control, the schedules' slots) that Redis refused or took.
- `problem_status`: the status when the spec cannot be acted on (condition Ready=False).
- `due`: whether a new status is worth writing now (a change that is only the measured ages and
  rates (DRIFT_FIELDS, `lastActiveTime` among them) moving on is written at most every
  STATUS_DRIFT_SECONDS; one that is only the ages growing (AGING_FIELDS) waits `drift_interval`:
  a quarter of the oldest task's age as last written, within [STATUS_DRIFT_SECONDS,
  STATUS_DRIFT_MAX_SECONDS] (the maximum when no age is shown), so a backlog nobody takes is
  rewritten ever more rarely while the age shown stays within a fifth of the real one).
- `initial_state`: the policy state after a restart, from the status last written.

A key whose value is None is sent as null in the merge patch, i.e. removed from the object:
while Redis cannot be read the counts are removed (unknown must not look like an empty queue;
`kubectl get tq` shows an empty BACKLOG column) and condition RedisReachable is False.

Every status built here is checked against the status model (`TaskQueueStatus`) before it is
returned: the API server drops a field its schema does not have without a word, so a misspelt
key must fail here, in the tests, instead.
"""

from __future__ import annotations

import datetime
from typing import Any

from taskqueue.api.models import ScalingSpec
from taskqueue.api.statusschema import TaskQueueStatus
from taskqueue.scaling import policy
from taskqueue.scaling.observation import QueueObservation, WrongType
from taskqueue.wire.flow import QueueFlow

Status = dict[str, Any]

STATUS_DRIFT_SECONDS = 15.0
"""A status change that is only DRIFT_FIELDS moving on is written at most this often; any other
change is written at once."""
STATUS_DRIFT_MAX_SECONDS = 120.0
"""The longest a change of AGING_FIELDS alone waits to be written (`drift_interval`)."""
DRIFT_FRACTION = 0.25
"""A change of AGING_FIELDS alone waits this fraction of the oldest task's age as last
written (at least STATUS_DRIFT_SECONDS)."""
DRIFT_FIELDS = ("oldestTaskAgeSeconds", "lastActiveTime", "waitSeconds", "arrivalRate",
                "serviceSeconds", "waitP95Seconds", "schedules", "nextScheduleTime")
AGING_FIELDS = ("oldestTaskAgeSeconds", "waitSeconds", "lastActiveTime")
"""The DRIFT_FIELDS that grow with the clock while tasks wait (`drift_interval`)."""
COUNTS = ("backlog", "totalBacklog", "inFlight", "delayed", "dueSoon", "nextDueTime",
          "deadLetter", "oldestTaskAgeSeconds", "throughputPerReplica", "workers", "waitSeconds",
          "arrivalRate", "serviceSeconds", "waitP95Seconds")
"""The fields read from Redis: absent (null) while Redis cannot be read."""


def iso(ts: float | None) -> str | None:
    """`ts` (unix seconds) as RFC 3339 in UTC, to the second; None stays None."""
    if ts is None:
        return None
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def from_iso(text: str | None) -> float | None:
    """The unix time of an RFC 3339 `text`; None when missing or not a time."""
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def condition(kind: str, ok: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": kind, "status": "True" if ok else "False", "reason": reason,
            "message": message}


def merge_conditions(old: list[dict[str, Any]], new: list[dict[str, Any]], *,
                     now: float) -> list[dict[str, Any]]:
    """`old` updated by `new`, sorted by type; lastTransitionTime kept where the status did not
    change, `now` where it did (or the condition is new)."""
    merged = {c["type"]: c for c in old}
    for c in new:
        prev = merged.get(c["type"])
        same = prev is not None and prev.get("status") == c["status"]
        stamp = prev.get("lastTransitionTime") if same and prev else iso(now)
        merged[c["type"]] = {**c, "lastTransitionTime": stamp}
    return sorted(merged.values(), key=lambda c: str(c["type"]))


def counts(observation: QueueObservation | None,
           state: policy.PolicyState) -> dict[str, Any]:
    """The COUNTS fields of an observation; all None (removed) when there is none."""
    if observation is None:
        return dict.fromkeys(COUNTS)
    age = observation.oldest_task_age
    rate = state.throughput_per_replica
    return {
        "backlog": dict(observation.backlog),
        "totalBacklog": observation.queued,
        "inFlight": observation.in_flight,
        "delayed": observation.delayed,
        "dueSoon": observation.due_soon,
        "nextDueTime": iso(observation.next_due_at),
        "deadLetter": observation.dead_letter,
        "oldestTaskAgeSeconds": None if age is None else round(age),
        "throughputPerReplica": None if rate is None else float(f"{rate:.3g}"),
        "workers": observation.live_workers,
        **measured(observation, state),
    }


def measured(observation: QueueObservation, state: policy.PolicyState) -> dict[str, Any]:
    """The wait model's fields: oldest wait, measured p95 wait and arrival rate per queue,
    service time."""
    waits = {q: round(age, 1) for q in observation.backlog
             if (age := observation.oldest_age(q)) is not None}
    service = state.rates.service.mean
    return {
        "waitSeconds": waits,
        "waitP95Seconds": {q: round(p95, 1) for q in observation.backlog
                           if (p95 := state.rates.waits.quantile(q, 0.95)) is not None},
        "arrivalRate": {q: round(state.rates.arrivals.rate(q), 3) for q in observation.backlog},
        "serviceSeconds": None if service is None else float(f"{service:.3g}"),
    }


def build_status(previous: Status | None, observation: QueueObservation | None,
                 outcome: policy.Outcome, *, deployment: str, ready_replicas: int,
                 error: str | None, generation: int | None, last_scale: float | None,
                 now: float, flow: tuple[QueueFlow, ...] = (), shard: str | None = None,
                 ) -> Status:
    """The TaskQueue's status after a poll of Deployment `deployment` (`observation` None: Redis
    unreadable) that set the replicas of `outcome`; the count last changed at `last_scale`;
    `shard`: the replica of a sharded operator that polled it (None: removed)."""
    state = outcome.decision.state
    paused = outcome.rule is policy.Rule.PAUSED
    reason = outcome.reason
    status = {
        **counts(observation, state),
        "desiredReplicas": outcome.replicas,
        "replicas": ready_replicas,
        "lastScaleTime": iso(last_scale),
        "lastActiveTime": iso(state.last_active),
        "reason": reason,
        "observedGeneration": generation,
        "shard": shard,
        **flow_status(flow),
    }
    scaling_reason = "Paused" if paused else (
        "RedisUnreachable" if error else ("Scaled" if outcome.changed else "Steady"))
    status["conditions"] = merge_conditions((previous or {}).get("conditions", []), [
        condition("Ready", True, "DeploymentReady", f"scaling Deployment {deployment}"),
        condition("RedisReachable", error is None, "Error" if error else "Read", error or ""),
        condition("Scaling", error is None and not paused, scaling_reason, reason),
        *([] if observation is None else [key_types(observation.wrong_types)]),
    ], now=now)
    return checked(status)


def flow_status(flows: tuple[QueueFlow, ...]) -> Status:
    """status.pausedQueues and status.flow of the queues with a limit or a pause (nothing when
    none has one)."""
    limited = [q for q in flows if q.limited]
    if not limited:
        return {}
    out: Status = {"pausedQueues": [q.key for q in limited if q.is_paused]}
    out["flow"] = {q.key: _queue_flow(q) for q in limited}
    return out


def _queue_flow(q: QueueFlow) -> dict[str, Any]:
    by = (["spec"] if q.paused else []) + (
        [f"taskqueue pause at {q.paused_cli.replace(' ', ' by ', 1)}"] if q.paused_cli else [])
    entry: dict[str, Any] = {"paused": q.is_paused, "pausedBy": by or None,
                             "maxInFlight": q.max_in_flight, "inFlight": q.held}
    if q.rate is not None:
        tasks, per, burst = q.rate
        entry["rateLimit"] = f"{tasks}/{per:g}s burst {burst}"
    return {k: v for k, v in entry.items() if v is not None}


def key_types(wrong: tuple[WrongType, ...]) -> dict[str, Any]:
    """Condition KeyTypes: False naming the first key that holds another type than its own
    (and how many more), True when every key of the TaskQueue holds its type or nothing."""
    if not wrong:
        return condition("KeyTypes", True, "Expected")
    more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
    return condition("KeyTypes", False, "WrongType",
                     f"{wrong[0].describe()}{more}: delete or fix it; until then it is read as "
                     "empty and no worker takes from or writes to it")


def problem_status(previous: Status | None, problem: str, *, reason: str, now: float,
                   shard: str | None = None) -> Status:
    """`previous` with condition Ready=False (`reason`, `problem`) and `problem` as the reason,
    reported by replica `shard` of a sharded operator."""
    status = {**(previous or {}), "shard": shard}
    status["conditions"] = merge_conditions(
        status.get("conditions", []), [condition("Ready", False, reason, problem)], now=now)
    status["reason"] = problem
    return checked(status)


WRITES = {
    "FlowControlWritten": ("Written", "FlowControlNotWritten", "flow control not written to Redis",
                           "workers keep the limits and pauses Redis holds"),
    "SchedulesFired": ("Fired", "SchedulesNotFired", "schedules not fired",
                       "their slots are sent again each poll, within catchUpSeconds"),
}
"""Per write condition: its reason when Redis took the write, the reason (and Event reason) of
a refusal, what a refusal means, and what then still holds."""


def with_writes(status: Status, refusals: dict[str, str | None], *, now: float) -> Status:
    """`status` with a write condition (`WRITES`) per entry of `refusals`: True when the write
    went through (None), False with Redis's password-free refusal. A write not attempted or
    whose reply never came (Redis unreachable: condition RedisReachable says so) has no entry,
    and its condition keeps what it said."""
    new = []
    for kind, refused in refusals.items():
        taken, not_taken = WRITES[kind][:2]
        new.append(condition(kind, True, taken) if refused is None else condition(
            kind, False, not_taken, refusal_message(kind, refused)))
    conditions = merge_conditions(status.get("conditions", []), new, now=now)
    return checked({**status, "conditions": conditions})


def refusal_message(kind: str, refused: str) -> str:
    """The condition's (and the Event's) message for a write of `kind` Redis refused."""
    _, _, what, still = WRITES[kind]
    return f"{what}: {refused} ({still}; {fix_of(refused)})"


def fix_of(refused: str) -> str:
    """How to lift a refusal of the operator's Redis writes."""
    if "NOPERM" in refused or "NoPermission" in refused:
        return "the operator's Redis user needs the command: `python -m taskqueue.redisio.acl " \
               "operator` prints its rule"
    if "WRONGTYPE" in refused or "FlowTypeError" in refused:
        return "delete the key named: the operator writes it again"
    return "fix Redis (memory, replica, persistence errors); the next poll tries again"


def with_schedules(status: Status, schedules: dict[str, Any]) -> Status:
    """`status` with `status.schedules` and `nextScheduleTime` (`controller.schedules.status`;
    None removes them), checked against the status model."""
    return checked({**status, **schedules})


def checked(status: Status) -> Status:
    """`status`, once the status model accepts it (pydantic's ValidationError otherwise: a key
    the schema does not have, or a value of another type)."""
    TaskQueueStatus.model_validate(status)
    return status


def drift_only(old: Status | None, new: Status, fields: tuple[str, ...] = DRIFT_FIELDS,
               ) -> bool:
    """True when `new` differs from `old` only in the values of `fields`."""
    if old is None:
        return False
    def rest(s: Status) -> Status:
        return {k: v for k, v in s.items() if k not in fields}
    def known(s: Status, k: str) -> bool:
        return s.get(k) is not None
    return rest(old) == rest(new) and all(known(old, k) == known(new, k) for k in fields)


def drift_interval(old: Status | None) -> float:
    """How long after writing `old` a change of AGING_FIELDS alone waits to be written:
    DRIFT_FRACTION of the oldest task's age `old` shows, within [STATUS_DRIFT_SECONDS,
    STATUS_DRIFT_MAX_SECONDS]; STATUS_DRIFT_MAX_SECONDS when it shows no age (tasks without an
    enqueue time, or only tasks in flight: `lastActiveTime` alone moves on, and only a restart
    reads it, with this as its slack)."""
    age = (old or {}).get("oldestTaskAgeSeconds")
    if age is None:
        return STATUS_DRIFT_MAX_SECONDS
    return min(STATUS_DRIFT_MAX_SECONDS, max(STATUS_DRIFT_SECONDS, DRIFT_FRACTION * float(age)))


def due(old: Status | None, new: Status, *, written: float | None, now: float) -> bool:
    """Whether `new` is to be written now, `old` having been written at `written`."""
    if new == old:
        return False
    if written is None or not drift_only(old, new):
        return True
    wait = drift_interval(old) if drift_only(old, new, AGING_FIELDS) else STATUS_DRIFT_SECONDS
    return now - written >= wait


def status_slack(scaling: ScalingSpec, status: Status | None) -> float:
    """How far `status.lastActiveTime` of `status` (as written) can lag the last poll that saw
    work (throttled writes)."""
    return drift_interval(status) + scaling.pollIntervalSeconds


def last_scale(status: Status | None) -> float | None:
    """When the replica count was last changed, as the status last written says."""
    return from_iso((status or {}).get("lastScaleTime"))


def initial_state(status: Status | None, *, slack: float = 0.0) -> policy.PolicyState:
    """The policy state after a restart: the durable part comes from the TaskQueue's status.

    While a TaskQueue has work, `lastActiveTime` is written at most every `drift_interval`
    (`drift_only`), so when the last status written shows work (or unknown counts: Redis was
    unreadable), the work may have lasted up to `slack` longer: the cooldown resumes from
    `lastActiveTime + slack` (a restart can delay a scale-in, never cause one). The status written
    when the work ends is never throttled.
    """
    status = status or {}
    last_active = from_iso(status.get("lastActiveTime"))
    backlog, in_flight = status.get("totalBacklog"), status.get("inFlight")
    busy = backlog is None or (backlog or 0) + (in_flight or 0) > 0
    if last_active is not None and busy:
        last_active += slack
    return policy.PolicyState(replicas=0, last_active=last_active)
