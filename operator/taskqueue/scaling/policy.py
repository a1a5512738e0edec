"""The scaling policy: a purely computational function with no side-effects.

`decide(spec=, observation=, state=, now=)` turns one Redis observation into a replica count, the
rule that decided it (`Rule`) and a reason. It reads no clock, talks to no Redis and no
Kubernetes; the poller (`taskqueue.controller.poller`) does the I/O and keeps the returned
`PolicyState` for the next call. `decide` is the only writer of that state: what the scale-in
allows afterwards (`taskqueue.scaling.quiesce`) is a separate result, `Outcome`.

The rules, in the order they are applied:

1. ``paused``: hold the current count (the observation still updates status and metrics).
2. Redis could not be read (``observation is None``): use ``fallbackReplicas`` when set, else hold
   the current count; never drop a running TaskQueue to zero because Redis is unreachable.
3. demand = queued + in-flight + due soon (delayed tasks, scheduled or retries, due within the
   next poll plus ``podStartupSeconds``: `due_horizon`, so workers are up when they fall due;
   the rest of the delayed set is not demand yet); recommendation = ceil(demand /
   targetBacklogPerReplica), and at least the pods whose slots the measured arrivals keep busy
   (arrival rate x service time / concurrency, once the service time is measured:
   `_held_load`), so the fleet does not drop below the load each time the queue drains.
4. ``targetDrainSeconds``: also ceil(queued / (per-replica rate x targetDrainSeconds)) when the
   per-replica completion rate has been measured; the larger of the two wins.
5. ``targetWaitSeconds`` (per queue): once the service time is measured (or, before that, expected:
   ``expectedServiceSeconds``, `waitpolicy.service_times`), the slots that keep the
   p95 wait of each such queue under its target, highest priority first
   (`taskqueue.scaling.waitmodel`, Erlang C with the measured rates, `taskqueue.scaling.rates`),
   divided by the worker concurrency; the length target then only counts the queues without a wait
   target, plus the tasks due soon. Until the service time is measured (3 attempts ended, or
   the workers' reports) and without an expected one, each task queued or in flight on a
   queue with a wait target gets a slot, as a burst (its pods leave with the backlog), however
   short the lower bound the tasks in hand give (`_slot_each`). The part of it the arrival
   rates need is the *steady* recommendation; a backlog beyond the normal fluctuation (a
   burst) adds slots to start it within the target, each added slot running at least
   `waitpolicy.burst_horizon` of it (podStartupSeconds, at least a poll), unless more than
   5 % of the queue's recent tasks waited past its target (the workers' wait histograms:
   `waitpolicy.over_budget`) and the target can still be met. The slots
   already up or on their way count first (`waitpolicy.standing_slots`: the pods of the scale-ups of
   the last two start-ups, `PolicyState.scale_ups`, are up that much sooner than pods asked
   for now), so a burst is not asked for again on each poll while its pods start; slots busy past
   a burst's deadline start none of it. Where a queue's target leaves room for a poll and a
   start-up, a task queued that long gets a slot whatever the queue's length (a rescue), and the
   steady slots are the cheapest counting the rescues they leave (`waitmodel.reacts_in_time`).
6. Idle (nothing queued, in flight or due soon): zero only once ``idleCooldownSeconds`` have
   passed since work was last seen; until then one replica stays, or, for arrivals that come in
   batches, the replicas the next batch needs (`waitmodel.WaitSizing.batches`) while the
   measured arrivals make a lull that long normal (`arrivals.Arrivals.lull_expected`), for up
   to ``idleCooldownSeconds`` + ``holdThroughLullsSeconds``. Those replicas are held only for
   batches that come closer together than holding them costs in idle pod-seconds against what
   re-activating them costs (`waitpolicy.lull_budget`: a poll + ``podStartupSeconds``, +
   ``holdThroughLullsSeconds``); batches further apart are released (``lull-released``): the
   fleet follows the rate between them and each batch is started as a burst when it lands.
   ``forecast``: when such released batches recur at a stable period (`forecast.expected`:
   the last three a stable gap apart, each seen on at most two polls), the fleet the next one
   would get on landing (`waitpolicy.sizing`, its pods up when it lands) is asked for a
   start-up (the measured one where shorter) and a poll before it is expected, idle or not,
   and held like a burst's until the batch is drained; a batch that has not come two polls
   past the spread of its gaps (`forecast.overdue_at`, at most a cooldown) after its time is
   overdue: the idle rule releases its pods, and it is not forecast again until the period is
   seen again. A forecast never holds an idle fleet past the idle rule's zero (`zero_by`).
   ``forecastBatches: false`` turns the rule off (each batch started when it lands).
7. Flow limits (`taskqueue.scaling.flowcap`): no more than the queues' rate limits, in-flight
   limits and pauses can use (a paused queue none, maxInFlight / concurrency, rate x service
   time (+ a 5-10 % headroom band, in whole pods) / concurrency; a rate-limited queue whose
   service time nothing tells yet holds the fleet), when every queue with work is bounded by one.
8. Clamp to [minReplicas, maxReplicas].
9. Up: immediate, at most ``maxScaleUpStep`` added (0 -> n on the first poll that sees a task).
   Down: to the highest recommendation of the last ``scaleDownStabilizationSeconds`` (as the HPA
   does) while a burst is being drained, else to the highest *steady* recommendation of that
   window (the burst's pods leave as soon as its backlog is gone: quiesce makes that safe), at
   most ``maxScaleDownStep`` removed; an idle TaskQueue past its cooldown goes to zero
   without waiting for the window or the step (the cooldown is its
   stabilisation). ``minReplicas`` is reached at once, whatever ``maxScaleUpStep``.

The policy may ask for fewer replicas than pods holding tasks: the operator then quiesces the
pods it removes and removes them once they hold nothing (`taskqueue.scaling.quiesce`).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling import flowcap, forecast, quiesce, waitmodel, waitpolicy
from taskqueue.scaling import rates as rates_
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire.flow import QueueFlow

NO_RATES = rates_.Rates()
"""Nothing measured yet."""
#: Weight of the newest sample in the smoothed per-replica throughput (exponential average).
THROUGHPUT_SMOOTHING = 0.5


@dataclass(frozen=True)
class PolicyState:
    """What the policy remembers between polls (see docs/operator.md for where each part lives)."""

    replicas: int
    """The worker Deployment's current replica count (its spec.replicas)."""
    recommendations: tuple[tuple[float, int], ...] = ()
    """(time, recommendation) pairs inside the scale-down stabilisation window."""
    steady_recommendations: tuple[tuple[float, int], ...] = ()
    """The same for the steady part (without a burst's backlog term): once a burst's backlog
    is gone, only these hold the fleet, so the pods added for it leave on the next poll."""
    last_active: float | None = None
    """Last time anything was queued or in flight, or the poll before a task completed (unix
    seconds; `_measure`)."""
    completed_total: int | None = None
    """The `completed` counter at the previous observation, for the throughput."""
    completed_at: float | None = None
    throughput_per_replica: float | None = None
    """Smoothed completed tasks per second per replica, once measured."""
    rates: rates_.Rates = NO_RATES
    """Arrival rate per queue and service time (for targetWaitSeconds)."""
    scale_ups: tuple[tuple[float, int], ...] = ()
    """(time, pods added) of the recent scale-ups: the pods not running yet are up
    podStartupSeconds after theirs (`waitpolicy.standing_slots`)."""
    activated_at: float | None = None
    """When the fleet was last scaled up from zero, until its first worker registers."""
    startup: float | None = None
    """Measured pod start-up: seconds from a scale-up from zero to the poll that saw its first
    worker registered (smoothed); the policy sizes with it where it is shorter than
    podStartupSeconds (`startup_seconds`)."""
    wait_trims: tuple[tuple[str, float], ...] = ()
    """(queue, factor > 1): how far the measured waits let the steady sizing stretch each
    queue's wait target (`waitpolicy.trimmed`)."""
    lull_released: frozenset[str] = frozenset()
    """The queues whose batches the last sizing did not hold through the lulls
    (`waitmodel.lull_released`: the choice keeps to itself near the lull budget)."""


class Rule(enum.StrEnum):
    """Which rule decided a replica count: a stable code for machines (the decision log,
    docs/contracts.md), beside the reason for people. Those of the scale-in (`quiesce`) say
    why the count stays above the policy's."""

    SCALE_UP = "scale-up"
    """More replicas for the load, reached at once."""
    MAX_SCALE_UP_STEP = "max-scale-up-step"
    """More replicas for the load, at most maxScaleUpStep more this poll."""
    SCALE_DOWN = "scale-down"
    """Fewer replicas for the load, the highest recommendation of the window."""
    MAX_SCALE_DOWN_STEP = "max-scale-down-step"
    """Fewer replicas for the load, at most maxScaleDownStep fewer this poll."""
    HOLD = "hold"
    """The load needs the replicas there are."""
    STABILISATION_WINDOW = "stabilisation-window"
    """Fewer would do, but a recommendation of the scale-down window is higher."""
    MAX_REPLICAS = "max-replicas"
    """The load needs more than maxReplicas."""
    MIN_REPLICAS = "min-replicas"
    """The load needs fewer than minReplicas."""
    IDLE_COOLDOWN = "idle-cooldown"
    """Nothing to do, and idleCooldownSeconds have not passed: one replica stays."""
    NEXT_BATCH = "next-batch"
    """Nothing to do, within the cooldown (+ holdThroughLullsSeconds), in a lull the measured
    batches make normal, and
    batches close enough together that holding their replicas costs less idle time than
    re-activating them (plus holdThroughLullsSeconds): the replicas the next batch needs stay."""
    LULL_RELEASED = "lull-released"
    """Nothing to do, within the cooldown, between batches too far apart for holding their
    replicas to pay (the idle pod-seconds until the next batch exceed re-activation's, a poll
    + podStartupSeconds, + holdThroughLullsSeconds): one replica stays, the next batch's
    start when it lands."""
    FORECAST = "forecast"
    """The next of a queue's batches that recur at a stable period, not held through the lull,
    is expected within a start-up and two polls: the replicas that start it within its wait
    target are started ahead of it (`taskqueue.scaling.forecast`)."""
    IDLE = "idle"
    """Nothing to do for idleCooldownSeconds (or never anything): zero."""
    PAUSED = "paused"
    """spec.scaling.paused: the count is held."""
    REDIS_UNREADABLE = "redis-unreadable"
    """Redis cannot be read: the count is held."""
    FALLBACK_REPLICAS = "fallback-replicas"
    """Redis cannot be read: spec.scaling.fallbackReplicas."""
    DRAINING = quiesce.DRAINING
    WORKERS_NOT_PODS = quiesce.WORKERS_NOT_PODS
    REPLICASET_ORDER = quiesce.REPLICASET_ORDER
    SCALE_IN_DEFERRED = quiesce.SCALE_IN_DEFERRED
    RATE_LIMIT_CAP = flowcap.RATE_LIMIT_CAP
    """The queues' rate limits cannot use more replicas."""
    IN_FLIGHT_CAP = flowcap.IN_FLIGHT_CAP
    """The queues' maxInFlight cannot use more replicas."""
    PAUSED_QUEUE = flowcap.PAUSED_QUEUE
    """The queues with work are paused: they can use no replica."""


@dataclass(frozen=True)
class Decision:
    """The policy's decision on one poll: the replica count to set, the rule that decided it and
    why, and the state for the next poll."""

    replicas: int
    previous: int
    """The replica count before this decision."""
    reason: str
    recommendation: int
    """The recommendation before stabilisation and step limits."""
    state: PolicyState
    rule: Rule

    @property
    def changed(self) -> bool:
        return self.replicas != self.previous


@dataclass(frozen=True)
class Outcome:
    """A poll's decision as carried out: the policy's `decision` and what the scale-in allows
    now (`settled`: at or above the decision's count on a scale-in whose victims still hold
    tasks)."""

    decision: Decision
    settled: quiesce.Settled = field(default=quiesce.UNCHANGED)

    @property
    def replicas(self) -> int:
        """The replica count set on this poll."""
        return self.decision.replicas if self.settled.replicas is None else self.settled.replicas

    @property
    def previous(self) -> int:
        return self.decision.previous

    @property
    def changed(self) -> bool:
        return self.replicas != self.previous

    @property
    def rule(self) -> Rule:
        """The scale-in's rule where it holds the count above the decision's, else the policy's."""
        if self.settled.rule and self.replicas != self.decision.replicas:
            return Rule(self.settled.rule)
        return self.decision.rule

    @property
    def reason(self) -> str:
        """The decision's reason, with what the scale-in did."""
        reason = self.decision.reason
        if self.settled.note:
            reason += f"; {self.settled.note}"
        if self.replicas != self.decision.replicas:
            reason += f"; now {self.replicas}"
        return reason


def decide(
    *,
    spec: ScalingSpec,
    observation: QueueObservation | None,
    state: PolicyState,
    now: float,
    concurrency: int = 1,
    queue_order: tuple[str, ...] = (),
    flow: tuple[QueueFlow, ...] = (),
) -> Decision:
    """The replica count for one poll. Pure: the same arguments always give the same Decision.

    `concurrency` is the worker's slots per replica and `queue_order` the queue keys in
    priority order (both from the TaskQueue spec; needed by targetWaitSeconds only); `flow`
    the queues' flow limits and pauses (as Redis holds them)."""
    current = state.replicas
    if observation is None:
        return _on_redis_error(spec, state)
    waits, since = state.rates.waits, state.rates.at
    state = _measure(state, observation, now)
    sized = startup_seconds(spec, state)
    order = queue_order or tuple(observation.backlog)
    at_zero = current == 0 and observation.live_workers == 0
    state = replace(state, wait_trims=waitpolicy.trimmed(
        sized, state.wait_trims, before=waits, after=state.rates.waits,
        dt=0.0 if since is None else observation.at - since, queue_order=order,
        restarting=at_zero))
    if spec.paused:
        return Decision(current, current, f"paused: holding {current}", current, state,
                        Rule.PAUSED)
    rec = _recommend(sized, observation, state, now, _Fleet(concurrency, order, flow))
    recommendation, why = rec.replicas, rec.why
    window = spec.scaleDownStabilizationSeconds
    history = (*_window(state.recommendations, now, window, current), (now, recommendation))
    steady = (*_window(state.steady_recommendations, now, window, current), (now, rec.steady))
    to_zero = recommendation == 0 and observation.queued + observation.in_flight == 0
    replicas, how, stage = _bounded(spec, current, recommendation,
                                    history if rec.burst else steady, to_zero=to_zero)
    new_state = replace(
        state,
        recommendations=history,
        steady_recommendations=steady,
        lull_released=rec.released,
        replicas=replicas,
        activated_at=now if at_zero and replicas > 0 else state.activated_at,
        scale_ups=_scale_ups(spec, state.scale_ups, now, added=replicas - current),
    )
    reason = f"{why}; {how}" if how else why
    return Decision(replicas, current, reason, recommendation, new_state, _rule(rec.rule, stage))


_LIMITS = frozenset({Rule.MAX_SCALE_UP_STEP, Rule.MAX_SCALE_DOWN_STEP, Rule.STABILISATION_WINDOW})


def _rule(source: Rule | None, stage: Rule) -> Rule:
    """The rule that decided the count: a step or the window when one held it from the
    recommendation, else what made the recommendation (idle, a bound) or, for the load, the
    direction it moved (`stage`)."""
    if stage in _LIMITS or source is None:
        return stage
    return source


SCALE_UPS_KEPT = 32
"""At most this many recent scale-ups are remembered (a pod still starting after more is
taken as asked for now)."""


def _scale_ups(spec: ScalingSpec, before: tuple[tuple[float, int], ...], now: float, *,
               added: int) -> tuple[tuple[float, int], ...]:
    """The scale-ups whose pods may still be starting: those of the last two start-ups and a
    poll, with this one when it adds pods."""
    keep = 2 * spec.podStartupSeconds + spec.pollIntervalSeconds
    recent = tuple((t, n) for t, n in before if 0 <= now - t < keep)
    if added > 0:
        recent = (*recent, (now, added))
    return recent[-SCALE_UPS_KEPT:]


def _on_redis_error(spec: ScalingSpec, state: PolicyState) -> Decision:
    current = state.replicas
    if spec.paused:
        return Decision(current, current, f"paused: holding {current}", current, state,
                        Rule.PAUSED)
    if spec.fallbackReplicas is None:
        return Decision(current, current, f"redis unreachable: holding {current}", current, state,
                        Rule.REDIS_UNREADABLE)
    target = _clamp(spec.fallbackReplicas, spec)
    if current > 0:
        target = max(target, 1)
    reason = f"redis unreachable: fallbackReplicas {spec.fallbackReplicas} -> {target}"
    return Decision(target, current, reason, target, replace(state, replicas=target),
                    Rule.FALLBACK_REPLICAS)


def _measure(state: PolicyState, obs: QueueObservation, now: float) -> PolicyState:
    """Update last-active time and the per-replica completion rate from `obs`. The fleet is
    active now if a task is queued or held, and was active after the last poll if one
    completed since: tasks shorter than a poll come and go between two polls that both see
    nothing, and a fleet serving them is not idle (counted from the last poll, the idle time
    reaches idleCooldownSeconds no later after the completion than if it had been seen)."""
    rate = state.throughput_per_replica
    prev, prev_at = state.completed_total, state.completed_at
    done = obs.completed_total - prev if prev is not None else -1
    busy = obs.queued + obs.in_flight > 0
    last_active = state.last_active
    if busy or last_active is None:
        last_active = now
    elif done > 0 and prev_at is not None:
        last_active = max(last_active, now - (obs.at - prev_at))
    elapsed = obs.at - prev_at if prev_at is not None else 0.0
    if done >= 0 and elapsed > 0 and state.replicas > 0 and (busy or done > 0):
        sample = done / elapsed / state.replicas
        rate = sample if rate is None else (
            THROUGHPUT_SMOOTHING * sample + (1 - THROUGHPUT_SMOOTHING) * rate
        )
    return _startup(replace(
        state,
        last_active=last_active,
        completed_total=obs.completed_total,
        completed_at=obs.at,
        throughput_per_replica=rate,
        rates=rates_.update(state.rates, obs),
    ), obs)


def _startup(state: PolicyState, obs: QueueObservation) -> PolicyState:
    """`state` with the start-up measured when the first worker of a scale-up from zero
    registers (an upper bound: it came up at most a poll earlier); a fleet back at zero before
    that measures nothing."""
    if state.activated_at is None:
        return state
    if state.replicas <= 0:
        return replace(state, activated_at=None)
    if obs.live_workers <= 0:
        return state
    sample = max(0.0, obs.at - state.activated_at)
    old = state.startup
    smoothed = sample if old is None else STARTUP_SMOOTHING * sample + (1 - STARTUP_SMOOTHING) * old
    return replace(state, activated_at=None, startup=smoothed)


STARTUP_SMOOTHING = 0.5
"""Weight of the newest start-up sample in `PolicyState.startup`."""


def startup_seconds(spec: ScalingSpec, state: PolicyState) -> ScalingSpec:
    """`spec` with podStartupSeconds lowered to the measured start-up (`PolicyState.startup`)
    when that is shorter: a pod that comes up sooner than the manifest says is worth asking for
    a burst with less work (`waitpolicy.burst_horizon`), and its batches cost less to
    re-activate (`waitpolicy.lull_budget`)."""
    if state.startup is None or state.startup >= spec.podStartupSeconds:
        return spec
    return spec.model_copy(update={"podStartupSeconds": state.startup})


def due_horizon(spec: ScalingSpec) -> float:
    """Seconds ahead in which delayed tasks count as demand: the next poll plus pod start-up."""
    return spec.pollIntervalSeconds + spec.podStartupSeconds


@dataclass(frozen=True)
class _Fleet:
    concurrency: int
    queue_order: tuple[str, ...]
    flow: tuple[QueueFlow, ...] = ()


@dataclass(frozen=True)
class _Recommendation:
    replicas: int
    why: str
    steady: int
    """The replicas the measured arrival rates need, without a burst's backlog term."""
    burst: bool = False
    """A backlog beyond the normal fluctuation is being drained."""
    rule: Rule | None = None
    """What made the recommendation when not the load: idle, or a bound."""
    released: frozenset[str] = frozenset()
    """The queues whose batches are not held through the lulls (`PolicyState.lull_released`)."""


def _recommend(
    spec: ScalingSpec, obs: QueueObservation, state: PolicyState, now: float, fleet: _Fleet
) -> _Recommendation:
    """The recommendation for this poll; `spec` with the start-up as measured
    (`startup_seconds`), as the trims of this poll were judged."""
    waited = frozenset(spec.targetWaitSeconds or {})
    standing = waitpolicy.standing_slots(spec, obs, replicas=state.replicas,
                                         scale_ups=state.scale_ups,
                                         concurrency=fleet.concurrency, now=now,
                                         held_after=waitpolicy.held_after(spec, state.rates))
    sizing = waitpolicy.sizing(spec, state.rates, obs, fleet.queue_order, standing,
                               trims=dict(state.wait_trims),
                               released_before=state.lull_released)
    # the length target counts the queues the wait model does not size
    by_length = _by_length(spec, obs, state, exclude=waited if sizing is not None else frozenset())
    rec, why = _held_load(*by_length, state.rates, fleet, exclude=waited)
    steady, burst, batches = rec, False, 0
    released = sizing.released if sizing is not None else ()
    if sizing is not None:
        rec, steady, burst, batches, why = _by_wait(sizing, rec=rec, why=why, fleet=fleet)
    unmeasured = not (state.rates.service.known or spec.expectedServiceSeconds)
    if unmeasured and waited and (backlog := sum(obs.backlog.get(q, 0) for q in waited)):
        if sizing is None:
            steady = min(rec, _held_load(*_by_length(spec, obs, state, exclude=waited),
                                         state.rates, fleet, exclude=waited)[0])
            burst = True
        each, each_why = _slot_each(backlog=backlog, in_flight=obs.in_flight, fleet=fleet)
        if each > rec:
            rec, burst, why = each, True, why + each_why
    rule: Rule | None = None
    zero_by = None  # when the idle rule takes an idle fleet to zero
    if obs.queued + obs.in_flight + obs.due_soon == 0:
        idle_for = now - (state.last_active if state.last_active is not None else now)
        rec, rule, why = _idle(spec, state, idle_for, batches=batches, released=released,
                               why=why)
        steady = rec
        if state.replicas > 0 and state.last_active is not None:
            zero_by = state.last_active + spec.idleCooldownSeconds
    ahead = _forecast(spec, obs, state, now, fleet, zero_by=zero_by)
    if ahead is not None and ahead[0] > rec:
        # held like a burst's pods (the window of every recommendation while it is in force),
        # not a steady need: once its batch is drained, or its window past, they leave
        rec, burst, rule = ahead[0], True, Rule.FORECAST
        why = f"{ahead[1]}; {why}"
    capped = _flow_cap(spec, obs, state, fleet)
    if capped is not None and capped.replicas < rec:
        rec, steady, rule = capped.replicas, min(steady, capped.replicas), Rule(capped.rule)
        why += f"; {capped.why}"
    clamped = _clamp(rec, spec)
    if clamped != rec:
        bound = "maxReplicas" if clamped < rec else "minReplicas"
        rule = Rule.MAX_REPLICAS if clamped < rec else Rule.MIN_REPLICAS
        why += f"; {bound} {clamped}"
    return _Recommendation(clamped, why, _clamp(min(steady, rec), spec), burst, rule,
                           frozenset(q for q, _ in released))


def _idle(spec: ScalingSpec, state: PolicyState, idle_for: float, *, batches: int,
          released: tuple[tuple[str, float], ...], why: str) -> tuple[int, Rule, str]:
    """Nothing queued, in flight or due soon for `idle_for` seconds: the replicas for the next
    batch while the lull is normal for the measured batches and within idleCooldownSeconds +
    holdThroughLullsSeconds (`batches` is 0 when they are too far apart to hold: `released`),
    else one until idleCooldownSeconds, then zero."""
    cooldown = spec.idleCooldownSeconds
    if state.replicas <= 0:
        return 0, Rule.IDLE, why
    within = f"idle {idle_for:.0f}s < idleCooldownSeconds {cooldown:g}"
    if idle_for >= cooldown:
        within = (f"idle {idle_for:.0f}s < idleCooldownSeconds {cooldown:g} + "
                  f"holdThroughLullsSeconds {spec.holdThroughLullsSeconds:g}")
    if (batches > 1 and idle_for < cooldown + spec.holdThroughLullsSeconds
            and state.rates.arrivals.lull_expected(idle_for)):
        return (batches, Rule.NEXT_BATCH,
                f"{within}: {batches} for the next batch (arrivals come in batches)")
    if idle_for >= cooldown:
        return 0, Rule.IDLE, f"idle {idle_for:.0f}s >= idleCooldownSeconds {cooldown:g}"
    if released:
        return 1, Rule.LULL_RELEASED, f"{within}: {_released(spec, released)}"
    return 1, Rule.IDLE_COOLDOWN, within


def _forecast(spec: ScalingSpec, obs: QueueObservation, state: PolicyState, now: float,
              fleet: _Fleet, *, zero_by: float | None) -> tuple[int, str] | None:
    """The replicas for the forecast batches of the queues with a wait target
    (`_forecast_batch`, `zero_by` as there), and why; None when no batch is due or
    `forecastBatches` is off. They are the fleet each batch would get from the wait model on
    landing, queued on top of what is queued now, as a burst on no standing slot whose added
    pods are up when it lands (`waitpolicy.sizing`, `ready`): each still runs at least
    `waitpolicy.burst_horizon` of it."""
    if not spec.forecastBatches:
        return None
    targets = spec.targetWaitSeconds or {}
    due = {q: b for q in fleet.queue_order if q in targets
           and (b := _forecast_batch(spec, state, q, now, zero_by=zero_by)) is not None}
    if not due:
        return None
    landed = replace(obs, backlog={q: n + round(due[q].tasks) if q in due else n
                                   for q, n in obs.backlog.items()})
    sizing = waitpolicy.sizing(spec, state.rates, landed, fleet.queue_order, ready=True)
    if sizing is None:
        return None
    replicas = math.ceil(sizing.slots / fleet.concurrency)
    whys = ", ".join(f"batch of ~{b.tasks:.0f} on {q} expected in "
                     f"{max(0.0, b.at - now):.0f}s (every ~{b.period:.0f}s)"
                     for q, b in due.items())
    return replicas, f"forecast: {whys}: {replicas} started ahead"


def _forecast_batch(spec: ScalingSpec, state: PolicyState, queue: str,
                    now: float, *, zero_by: float | None) -> forecast.Expected | None:
    """`queue`'s next batch when its fleet is to be up for it now: its batches are not held
    through the lull, and it is expected within a start-up and FORECAST_LEAD_POLLS polls, or
    was expected and is not overdue yet (`forecast.overdue_at`, at most a cooldown: a batch
    that has not come by then leaves its pods to the idle rule; a missed forecast costs its
    fleet a start-up, a poll and the few polls to its overdue time).

    `zero_by`: while an idle fleet's cooldown runs, when the idle rule takes it to zero. A
    forecast keeps that promise: a batch expected by then is held until then and no longer (on
    the poll at `zero_by` the idle rule decides: held through that poll by the stabilisation
    window, the fleet reached zero a poll late), and one expected later gets its fleet only once
    the fleet has been to zero (a start from zero, as for a batch after a longer lull)."""
    if _batches_held(spec, state, queue):
        return None
    poll = spec.pollIntervalSeconds
    batch = forecast.expected(state.rates.arrivals.batches, queue, now=now, poll=poll)
    if batch is None:
        return None
    lead = spec.podStartupSeconds + FORECAST_LEAD_POLLS * poll
    end = min(batch.at + spec.idleCooldownSeconds, forecast.overdue_at(batch, poll=poll))
    if zero_by is not None:
        if batch.at > zero_by and now <= zero_by:
            return None
        if batch.at <= zero_by:
            end = min(end, zero_by - 1e-9)
    if not batch.at - lead <= now <= end:
        return None
    return batch


FORECAST_LEAD_POLLS = 1.0
"""A forecast batch's replicas are asked for a start-up and this many polls before the poll
expected to see it (it lands up to a poll before that poll)."""


def _batches_held(spec: ScalingSpec, state: PolicyState, queue: str) -> bool:
    """The lull rule holds `queue`'s batches: measured as batches (`arrivals.Arrivals.cv2`)
    that come closer together than `waitpolicy.lull_budget` (`waitmodel.lull_released`)."""
    arrivals = state.rates.arrivals
    load = waitmodel.QueueLoad(key=queue, arrival_rate=arrivals.rate(queue), queued=0,
                               target_wait=None, arrival_cv2=arrivals.cv2(queue))
    gap = load.batch_gap()
    return gap is not None and not waitmodel.lull_released(
        gap=gap, budget=waitpolicy.lull_budget(spec), was_released=queue in state.lull_released)


def _released(spec: ScalingSpec, released: tuple[tuple[str, float], ...]) -> str:
    """Why the next batch's replicas are not held through a lull."""
    gaps = ", ".join(f"{q} ~{gap:.0f}s" for q, gap in released)
    budget = f"{waitpolicy.reactivation_seconds(spec):g}s to re-activate"
    if spec.holdThroughLullsSeconds:
        budget += f" + holdThroughLullsSeconds {spec.holdThroughLullsSeconds:g}"
    return f"batches apart ({gaps}) idle a held pod longer than {budget}: not held"


def _flow_cap(spec: ScalingSpec, obs: QueueObservation, state: PolicyState,
              fleet: _Fleet) -> flowcap.Cap | None:
    """What the queues' flow limits let the fleet use (`flowcap`), None when unbounded."""
    if not any(q.limited for q in fleet.flow):
        return None
    queues = tuple(q.key for q in fleet.flow)
    busy = {q: obs.backlog.get(q, 0) > 0 or state.rates.arrivals.rate(q) > 0 for q in queues}
    return flowcap.cap(fleet.flow, busy=busy,
                       service=flowcap.service_times(state.rates.service,
                                                     dict(spec.expectedServiceSeconds or {}),
                                                     queues),
                       concurrency=fleet.concurrency, current=state.replicas)


def _by_wait(sizing: waitmodel.WaitSizing, *, rec: int, why: str,
             fleet: _Fleet) -> tuple[int, int, bool, int, str]:
    """The wait model's sizing over the length target's `rec` (and its `why`), in pods:
    (replicas, steady replicas, a burst's, pods for the next batch, why)."""
    batches = math.ceil(sizing.batches / fleet.concurrency)
    steady = max(rec, math.ceil(sizing.steady / fleet.concurrency))
    wait_rec = math.ceil(sizing.slots / fleet.concurrency)
    if wait_rec < rec:
        return rec, steady, False, batches, why
    return (wait_rec, steady, sizing.burst, batches,
            f"{sizing.why} / concurrency {fleet.concurrency} = {wait_rec}")


def _slot_each(*, backlog: int, in_flight: int, fleet: _Fleet) -> tuple[int, str]:
    """Pods for a slot per task queued (on the queues with a wait target) or in flight, and
    why: what a burst gets before its service time is measured. Nothing tells how soon a busy
    slot frees then: the lower bound the tasks in hand give has only begun to count on a
    burst's first polls (a second where the tasks take eight, or twenty), and the wait model
    sized with it starts a fraction of the pods the burst needs."""
    each = math.ceil((backlog + in_flight) / fleet.concurrency)
    return each, (f"; no service time yet: a slot for each of {backlog} queued + "
                  f"{in_flight} in flight / concurrency {fleet.concurrency} = {each}")


def _by_length(spec: ScalingSpec, obs: QueueObservation, state: PolicyState,
               exclude: frozenset[str] = frozenset()) -> tuple[int, str]:
    """The backlog target (and the drain target), over the queues not in `exclude`; delayed
    tasks due soon always count (the wait model sees only arrivals already measured)."""
    queued = sum(n for q, n in obs.backlog.items() if q not in exclude)
    in_flight = obs.in_flight if not exclude else 0
    demand = queued + in_flight + obs.due_soon
    rec = math.ceil(demand / spec.targetBacklogPerReplica)
    why = f"demand {demand} ({queued} queued + {in_flight} in flight"
    why += f" + {obs.due_soon} due soon)" if obs.due_soon else ")"
    why += f" / target {spec.targetBacklogPerReplica} = {rec}"
    rate = state.throughput_per_replica
    if spec.targetDrainSeconds is not None and rate and queued:
        # a rate decayed towards 0 (hours without a completion) would give infinity: more
        # than maxReplicas is all this needs to say
        drain = math.ceil(min(queued / (rate * spec.targetDrainSeconds), spec.maxReplicas + 1))
        if drain > rec:
            rec = drain
            why += f"; drain {queued} in {spec.targetDrainSeconds:g}s at {rate:.3g}/s/replica"
            why += f" = {drain}"
    return rec, why


def _held_load(rec: int, why: str, rates: rates_.Rates, fleet: _Fleet,
               exclude: frozenset[str]) -> tuple[int, str]:
    """At least the pods whose slots the measured arrivals keep busy (arrival rate x service
    time / concurrency, over the queues without a wait target): fewer serve less than arrives,
    and the length target alone would drop the fleet there whenever the backlog is briefly gone."""
    queues = [q for q in fleet.queue_order if q not in exclude]
    services = rates.service.by_queue(queues) if queues and rates.service.known else None
    if not services:
        return rec, why
    load = sum(rates.arrivals.rate(q) * services[q] for q in queues)
    held = math.ceil(load / fleet.concurrency - 1e-9)
    if held > rec:
        load_why = f"the measured load {load:.3g} slots / concurrency {fleet.concurrency}"
        return held, f"{why}; {load_why} = {held}"
    return rec, why


def _window(
    history: tuple[tuple[float, int], ...], now: float, seconds: float, current: int
) -> tuple[tuple[float, int], ...]:
    """The recommendations still inside the window; seeded with `current` when none is known."""
    if not history and seconds > 0:
        return ((now, current),)
    return tuple((t, r) for t, r in history if now - t < seconds)


def _bounded(
    spec: ScalingSpec, current: int, rec: int, history: tuple[tuple[float, int], ...], *,
    to_zero: bool = False,
) -> tuple[int, str, Rule]:
    """The count the recommendation `rec` allows now, how, and the stage that decided it."""
    if rec > current:
        step = spec.maxScaleUpStep
        # minReplicas is a bound, not a load: reached at once, whatever the step (as the HPA)
        target = rec if step is None else max(spec.minReplicas, min(rec, current + step))
        how = f"scale up {current} -> {target}"
        if target < rec:
            how += f" (maxScaleUpStep {step})"
            return target, how, Rule.MAX_SCALE_UP_STEP
        return target, how, Rule.SCALE_UP
    stabilised = rec if to_zero else _clamp(max(r for _, r in history), spec)
    target = min(current, stabilised)
    step = spec.maxScaleDownStep
    # an idle TaskQueue past its cooldown holds no task: its pods all go at once (as KEDA's
    # scale to zero, outside the HPA's policies); the step paces a scale-in under load
    if step is not None and current - target > step and not to_zero:
        target = current - step
    target = _clamp(target, spec)
    if target == current:
        if stabilised > rec:
            return (current, f"hold {current} (highest in the stabilisation window: {stabilised})",
                    Rule.STABILISATION_WINDOW if rec < current else Rule.HOLD)
        return current, f"hold {current}", Rule.HOLD
    how = f"scale down {current} -> {target}"
    if target <= rec:
        return target, how, Rule.SCALE_DOWN
    how += f" (stabilised {stabilised}"
    if target > stabilised:
        return target, how + f", maxScaleDownStep {step})", Rule.MAX_SCALE_DOWN_STEP
    return target, how + ")", Rule.STABILISATION_WINDOW


def _clamp(value: int, spec: ScalingSpec) -> int:
    return max(spec.minReplicas, min(spec.maxReplicas, value))
