"""What a poll appends to the TaskQueue's history and decision log (`taskqueue.wire.history`). Pure.

A decision entry is written when the decision changes: the poll changes the replica count, or
sets another count, rule or set of quiesced pods than the last entry says (the first poll of an
operator process writes one). `scale-up`, `scale-down` and `hold` are one rule, the load's, in
its three directions: the poll after a scale-up that holds the new count writes nothing.

A history point is written by the first poll that finds an interval of
`spec.history.intervalSeconds` ended (intervals on the unix clock: 10 s intervals end at :00,
:10, ...); it covers the time since the observation the previous point ended with (`dt`).

No extra round trip: what a poll produces waits in `Journal.pending` and goes to Redis in the
same pipeline as the next poll's observe call (`taskqueue.redisio.queueops.observe_appending`).
So an entry lands one poll late, and the entries of the last poll are lost when the operator
stops; while Redis cannot be read they wait, at most MAX_PENDING of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from taskqueue.api.historyspec import HistorySpec
from taskqueue.scaling import arrivals, policy, rates, waits
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import history, keys

MAX_PENDING = 64
"""Appends kept while they cannot be sent (Redis unreadable); the oldest go first."""


@dataclass(frozen=True)
class Journal:
    """What the history and the decision log carry from poll to poll (in the `Record`)."""

    last: history.DecisionEntry | None = None
    """The last decision entry produced."""
    base: QueueObservation | None = None
    """The observation the last history point ended with (the first one, before any point)."""
    pending: tuple[history.Append, ...] = ()
    """Appends produced and not yet sent."""


@dataclass(frozen=True)
class Fleet:
    """The Deployment's counts after a poll."""

    desired: int
    """The replica count the poll set."""
    pods: int
    ready: int


def ms(seconds: float) -> int:
    """Unix seconds as whole milliseconds."""
    return round(seconds * 1000)


def after_poll(journal: Journal, *, spec: HistorySpec, schema: keys.KeySchema,
               outcome: policy.Outcome, observation: QueueObservation | None, fleet: Fleet,
               now: float) -> Journal:
    """`journal` after a poll at `now` (the appends it produced added to `pending`)."""
    if not spec.enabled:
        return Journal()
    appends = list(journal.pending)
    entry = decision_entry(outcome, observation, previous=journal.last, now=now)
    if entry is not None:
        appends.append(history.Append(schema.decisions, entry.fields(), spec.decisions))
    base = journal.base
    if observation is not None:
        if base is None:
            base = observation
        elif point_due(base.at, observation.at, spec.intervalSeconds):
            point = history_point(base, observation, fleet=fleet,
                                  queues=schema.queue_keys)
            appends.append(history.Append(schema.history, point.fields(), spec.points))
            base = observation
    return replace(journal, last=entry or journal.last, base=base,
                   pending=tuple(appends[-MAX_PENDING:]))


def decision_entry(outcome: policy.Outcome, observation: QueueObservation | None, *,
                   previous: history.DecisionEntry | None,
                   now: float) -> history.DecisionEntry | None:
    """The decision entry of a poll, None when it changed nothing `previous` (the last entry)
    says: neither the replica count it sets, nor the rule, nor the pods quiesced."""
    quiesced = outcome.settled.quiesced
    if quiesced is not None:
        names = tuple(sorted(quiesced))
    else:  # Redis was not read: as the last entry says
        names = previous.quiesced if previous is not None else ()
    entry = history.DecisionEntry(
        t=ms(now), previous=outcome.previous, replicas=outcome.replicas,
        recommendation=outcome.decision.recommendation, rule=str(outcome.rule),
        reason=outcome.reason,
        backlog=None if observation is None else observation.queued,
        inflight=None if observation is None else observation.in_flight,
        quiesced=names, removed=max(0, outcome.previous - outcome.replicas))
    same = previous is not None and (previous.replicas, _kind(previous.rule),
                                     previous.quiesced) == (entry.replicas, _kind(entry.rule),
                                                            entry.quiesced)
    return None if same and not outcome.changed else entry


LOAD_RULES = frozenset({policy.Rule.SCALE_UP, policy.Rule.SCALE_DOWN, policy.Rule.HOLD})
"""The rules of the load in its three directions: one rule for the decision log."""


def _kind(rule: str) -> str:
    return "load" if rule in LOAD_RULES else rule


def point_due(last: float, now: float, interval: float) -> bool:
    """Whether an interval of `interval` seconds (on the unix clock) ended between `last` and
    `now`."""
    return now // interval > last // interval


def history_point(base: QueueObservation, obs: QueueObservation, *, fleet: Fleet,
                  queues: tuple[str, ...]) -> history.HistoryPoint:
    """The history point of the interval from observation `base` to `obs`."""
    reset = obs.completed_total < base.completed_total  # the stats hash was reset: unknown
    ended = rates.ended_since(obs, completed=base.completed_total, failed=base.failed_total)
    entered = arrivals.entered(obs, backlog=base.backlog, taken=base.taken,
                               in_flight=base.in_flight, ended=ended)
    return history.HistoryPoint(
        t=ms(obs.at), dt=ms(obs.at) - ms(base.at), desired=fleet.desired, replicas=fleet.pods,
        ready=fleet.ready, inflight=obs.in_flight, workers=obs.live_workers,
        completed=None if reset else obs.completed_total - base.completed_total,
        failed=None if reset else max(0, obs.failed_total - base.failed_total),
        queues={q: queue_point(base, obs, q, arrived=None if reset else entered.get(q))
                for q in queues})


def queue_point(base: QueueObservation, obs: QueueObservation, queue: str, *,
                arrived: float | None) -> history.QueuePoint:
    """Queue `queue` over the interval from `base` to `obs`."""
    attempts, service_ms, service_sq = _service(base, obs, queue)
    age = obs.oldest_age(queue)
    return history.QueuePoint(
        backlog=obs.backlog.get(queue), arrived=None if arrived is None else round(arrived),
        attempts=attempts, service_ms=service_ms, service_sq_ms2=service_sq,
        oldest_ms=None if age is None else ms(age), p95_wait_ms=_p95_wait_ms(base, obs, queue))


def _service(base: QueueObservation, obs: QueueObservation,
             queue: str) -> tuple[int | None, int | None, int | None]:
    """(attempts, their ms, their squared ms) the workers reported for `queue` in the interval;
    None where unknown: not reported, or totals that went down (a reset stats hash)."""
    now, before = obs.service.get(queue), base.service.get(queue, (0.0, 0))
    if now is None or now[1] < before[1] or now[0] < before[0]:
        return None, None, None
    attempts = now[1] - before[1]
    square, square_before = obs.service_sq.get(queue), base.service_sq.get(queue, (0.0, 0))
    squares = None  # known when every attempt's square was reported
    if (square is not None and square[1] - square_before[1] == attempts
            and square[0] >= square_before[0]):
        squares = round((square[0] - square_before[0]) * 1e6)
    return attempts, round((now[0] - before[0]) * 1000), squares


def _p95_wait_ms(base: QueueObservation, obs: QueueObservation, queue: str) -> int | None:
    """The p95 wait of the tasks whose wait the workers measured in the interval."""
    now = obs.waited.get(queue)
    if now is None:
        return None
    before = base.waited.get(queue, (0,) * len(now))
    if len(before) != len(now):
        return None
    delta = [n - b for n, b in zip(now, before, strict=True)]
    if any(d < 0 for d in delta):
        return None
    p95 = waits.wait_quantile_of(delta, 0.95)
    return None if p95 is None else ms(p95)
