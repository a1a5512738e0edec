"""Queueing model for wait-time targets: Erlang C with non-preemptive priority classes. Pure.

The fleet is c slots (replicas x concurrency) serving tasks of mean service time S; queue k (in
priority order) receives lambda_k tasks/s. With a_k = S * (lambda_1 + ... + lambda_k) the load of
the queues served before or with k, sigma_k = a_k / c, and A = a_n the whole load, the wait of a
task of queue k (M/M/c, non-preemptive priority, Cobham's formula) is

    P(W_k > t) ~= C(c, A) * exp(-t * (c / S) * (1 - sigma_{k-1}) * (1 - sigma_k))

where C(c, A) is the Erlang C probability that a task waits at all (1 when c <= A). For one
queue this is the exact Erlang C tail. Service times that are not exponential scale the decay
by 2 / (1 + cv2) (Allen-Cunneen: the wait of M/G/c ~= that of M/M/c x (1 + cv2) / 2, cv2 the
squared coefficient of variation of the service time of the tasks arriving, measured by the
workers): constant times (cv2 0) wait half as long, heavy-tailed ones longer.
`slots_for_wait` returns the fewest slots that keep the p95 (`QUANTILE`) wait of each queue
with a target under it, highest priority first; and, when more tasks are queued (in k and ahead
of it) than that fleet would have queued 95 % of the time
(P(queue > n) = C * rho^(n+1)), the slots that start the excess within the target as well
(a burst; a normal fluctuation adds nothing): with w = target - oldest age - pod start-up the
time left once pods added now are up (but at least horizon - S, so that each added slot runs at
least `horizon` seconds of the burst), k new slots start k tasks at once and k / S a second
after: a_k + 0.95 x excess / (1 + w / S) (`_burst_slots`). The slots already there or on their
way (`Standing`: idle, busy, pods still starting) are counted first, each for the tasks it
starts by the oldest task's deadline from the time it is up: a pod asked for a poll ago is up
sooner than one asked for now, so a burst that has not started yet is not sized again, poll
after poll, as if its pods were not coming. Once the target is out of reach there is no
deadline, only the floor, which moves with each poll: a standing slot then counts as a new one
(counted to the end of a window always startup + w away, the slots up drained a burst slower on
every poll). The floor gives way to the target for
a queue whose measured late share is over its 5 % (`QueueLoad.over_budget`) while the target
can still be met: the target is the user's, the floor only a saving.

Arrivals that come in batches (`QueueLoad.arrival_cv2` D > 1, the index of dispersion the
operator measures: the mean size of the batch a task arrives in) scale the decay by 2 / (D +
cv2) instead (Allen-Cunneen with D as the arrivals' cv2), and the steady fleet also starts 95 %
of a batch within the target (`batch_slots`); a batch of that size queued is then normal, not a
burst.

A queue's `QueueLoad.trim` (> 1 where the workers' measured waits stay far inside its target:
`waitpolicy.trimmed`) stretches the target its steady slots and a backlog behind it are sized
for; its bursts are still started within the target itself.

A slot whose task has run far longer than the measured service time (`Standing.held`: a
heavy-tailed task minutes long among sub-second ones, not yet in the mean, which the workers
report as tasks end) frees no time soon. Once the oldest queued task has waited as long as a
reaction allows (`held_due`), the fleet keeps more slots than the load besides the held ones:
otherwise the one free pod of a fleet sized for the load would be scaled in while the queue
waits on the held one.

Where reacting can still meet a queue's target (target >= a poll + the pod start-up:
`reacts_in_time`), the steady fleet need not hold the tail of the waits itself. When the
oldest task queued is as old as target - start-up - poll and the queue is no longer than a
normal fluctuation (a longer one is a burst, sized against the same deadline), the tasks are
*rescued*: every task queued through that queue counts as a burst (a slot held by a long
task frees no sooner for the queue being short). The steady slots are then the count c, up to
what the target asks, that costs least in slot-seconds per second: c, plus the rescues it
leaves, lambda x P(W_c > target - start-up - poll) x (start-up + poll), each a pod started and
a poll before its slot is judged again (`_rescued_steady`). For slow tasks on a fast-starting
fleet that is a small fleet and a slot for each task past it, as reacting costs; a rescue's
slots are a burst's, gone with its backlog.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

QUANTILE = 0.95
TAIL_LOG = math.log(1 / (1 - QUANTILE))
"""ln 20: an exponential tail falls to 1 - QUANTILE after this many means."""
MAX_SLOTS = 100_000


@dataclass(frozen=True)
class Standing:
    """The slots already up or on their way when a burst is sized."""

    idle: int = 0
    """Slots of running workers holding no task: free now."""
    busy: int = 0
    """Slots of running workers holding a task: free after about a service time."""
    starting: tuple[tuple[float, int], ...] = ()
    """(seconds until up, slots) of the pods asked for and not running yet."""
    held: int = 0
    """Of the busy slots, those whose task has run far longer than the measured service time
    (`waitpolicy.held_after`): a task queued behind them finds no slot in them."""

    def ranked(self, *, per_task: float, reserved: float) -> list[tuple[float, float]]:
        """(seconds until free, slots), soonest first, after `reserved` slots (the erlangs the
        arrivals keep busy) are set aside: those are taken from the busy slots first (the
        arrivals are what keeps them busy), then from the soonest free."""
        groups = [(per_task, float(self.busy)), (0.0, float(self.idle)),
                  *((max(0.0, up), float(n)) for up, n in self.starting)]
        out: list[tuple[float, float]] = []
        for up, n in groups:
            kept = min(n, reserved)
            reserved -= kept
            if n > kept:
                out.append((up, n - kept))
        return sorted(out)


NO_STANDING = Standing()
"""Nothing known of the fleet: every slot of a burst is sized as if asked for now."""


@dataclass(frozen=True)
class QueueLoad:
    """One queue as the model sees it, in priority order."""

    key: str
    arrival_rate: float
    """Measured tasks per second entering the queue."""
    queued: int
    target_wait: float | None
    """Seconds the p95 wait should stay under (None: no target for this queue)."""
    service: float | None = None
    """Mean service seconds of this queue's tasks (None: the fleet-wide mean)."""
    oldest_age: float = 0.0
    """Seconds the oldest queued task has already waited (spent from its target)."""
    cv2: float | None = None
    """Squared coefficient of variation of this queue's service time (None: unknown)."""
    arrival_cv2: float | None = None
    """Index of dispersion of this queue's arrivals per poll (`arrivals.Arrivals.cv2`: 1 for
    Poisson, the mean size of the batch a task arrives in for batches; None: unknown, taken as
    Poisson). Values under 1 are taken as 1."""
    over_budget: bool = False
    """More than 1 - QUANTILE of this queue's recent tasks waited longer than its target
    (measured by the workers: `waits.Waits.late_share`): its bursts are then started within
    the target whenever that is still possible, without the `horizon` floor."""
    between_rate: float | None = None
    """Measured tasks per second entering the queue on polls that saw no batch
    (`arrivals.Arrivals.rate_between`; None: `arrival_rate`): the rate a queue whose batches
    are released is sized for."""
    trim: float = 1.0
    """The factor (>= 1) the steady sizing stretches `target_wait` by: the measured waits say
    the model sizes this queue for far fewer late tasks than the quantile allows
    (`waitpolicy.trimmed`). It sizes the slots for the arrivals and for a backlog behind the
    queue; a burst of this queue is still started within `target_wait`."""

    def released(self) -> QueueLoad:
        """This queue with its batches released through the lulls: Poisson at the rate
        between its batches (each batch is a burst when it lands, started from the backlog;
        counted in the rate too, it would hold standing slots for its share of the tasks
        through every lull)."""
        rate = self.arrival_rate if self.between_rate is None else self.between_rate
        return replace(self, arrival_rate=rate, arrival_cv2=None)

    def batch_gap(self) -> float | None:
        """Expected seconds from one of this queue's batches to the next: D / lambda (batches of
        the size D a task arrives in, as events of a Poisson process, so the same whenever it is
        asked); None for arrivals that do not come in batches (D <= 1) or none at all."""
        ca2 = self.arrival_cv2 or 1.0
        if ca2 <= 1 or self.arrival_rate <= 0:
            return None
        return ca2 / self.arrival_rate


def erlang_c(slots: int, load: float) -> float:
    """Probability that an arriving task waits (M/M/c); 1 when `slots` <= `load`."""
    return _erlang_c_of_b(slots, load, _erlang_b(slots, load) if 0 < load < slots else 1.0)


def _erlang_b(slots: int, load: float) -> float:
    """Erlang B by its stable recurrence (`_next_erlang_b` from no slots up)."""
    b = 1.0
    for n in range(1, slots + 1):
        b = _next_erlang_b(b, n, load)
    return b


def _next_erlang_b(b: float, slots: int, load: float) -> float:
    """Erlang B for `slots` from Erlang B for `slots` - 1 (1 for none)."""
    return load * b / (slots + load * b)


def _erlang_c_of_b(slots: int, load: float, b: float) -> float:
    """`erlang_c` from the Erlang B `b` of the same slots and load."""
    if load <= 0:
        return 0.0
    if slots <= load:
        return 1.0
    rho = load / slots
    return b / (1 - rho + rho * b)


def wait_tail(*, slots: int, service: float, load_before: float, load_through: float,
              load_total: float, wait: float, cv2: float = 1.0, ca2: float = 1.0,
              waiting: float | None = None) -> float:
    """P(W > wait) for a task of a queue whose higher-priority load is `load_before` and whose
    load with its own is `load_through` (Erlang loads, tasks/s x S); `cv2` is the squared
    coefficient of variation of the service time (1: exponential), `ca2` that of the arrivals
    (1: Poisson). `waiting` is erlang_c(slots, load_total) when the caller has it."""
    if slots <= load_through:
        return 1.0
    if service <= 0:  # tasks that take no time: a free slot is always there
        return 0.0
    s_before, s_through = load_before / slots, load_through / slots
    rate = slots / service * (1 - s_before) * (1 - s_through) / ((ca2 + cv2) / 2)
    if waiting is None:
        waiting = erlang_c(slots, load_total)
    return waiting * math.exp(-wait * rate)


def normal_queue(*, slots: int, load: float) -> int:
    """The queue length this fleet exceeds only 5 % of the time (M/M/c)."""
    if slots <= load:
        return 0
    c, rho = erlang_c(slots, load), load / slots
    if c <= 1 - QUANTILE:
        return 0
    return max(0, math.ceil(math.log((1 - QUANTILE) / c) / math.log(rho)) - 1)


def slots_for_queue(*, service: float, load_before: float, load_through: float,
                    load_total: float, target: float, cv2: float = 1.0, ca2: float = 1.0) -> int:
    """Fewest slots that keep P(W > target) <= 1 - QUANTILE for one queue. Erlang B is carried
    from one slot count to the next (one step each), so the search is linear in the slots, not
    quadratic (a load of thousands of erlangs is sized in milliseconds)."""
    c = max(1, math.floor(load_through) + 1)
    if c >= MAX_SLOTS:
        return MAX_SLOTS
    b = _erlang_b(c, load_total)
    while c < MAX_SLOTS:
        tail = wait_tail(slots=c, service=service, load_before=load_before,
                         load_through=load_through, load_total=load_total, wait=target,
                         cv2=cv2, ca2=ca2, waiting=_erlang_c_of_b(c, load_total, b))
        if tail <= 1 - QUANTILE:
            return c
        c += 1
        b = _next_erlang_b(b, c, load_total)
    return MAX_SLOTS


def batch_ahead(ca2: float) -> float:
    """Tasks ahead of a task in its own batch that 95 % of the tasks stay under, for arrivals
    whose dispersion is `ca2` (the mean size of the batch a task arrives in; 0 for Poisson
    arrivals, 1): taken as exponential, of mean (ca2 - 1) / 2 (geometric batch sizes)."""
    return max(0.0, (ca2 - 1) / 2 * TAIL_LOG)


def batch_slots(*, load: float, ca2: float, service: float, target: float) -> int:
    """Slots that start 95 % of the tasks of arrivals in batches within `target` (0 for
    Poisson arrivals): k free slots start k tasks at once and k / S a second after, so
    k (1 + target / S) tasks in time must cover `batch_ahead`; the slots the load keeps busy
    are not free."""
    if ca2 <= 1:
        return 0
    return min(MAX_SLOTS, math.ceil(load + batch_ahead(ca2) / (1 + target / service)))


@dataclass(frozen=True)
class WaitSizing:
    """The slots for the wait targets, and the part of them the arrival rates alone need."""

    slots: int
    steady: int
    """Slots for the measured arrivals without the burst term (<= `slots`)."""
    why: str
    batches: int = 0
    """The part of `steady` that starts the batches the arrivals come in (`batch_slots`; 0 for
    Poisson arrivals): held through a lull between batches, when nothing is queued."""
    backlogged: bool = False
    """A queue holds more than the steady slots start in time, judged without the standing
    fleet's head start (as if none of its slots were up yet): the slots already draining a
    burst can make `slots` fall to `steady` while its backlog is still queued."""
    released: tuple[tuple[str, float], ...] = ()
    """(queue, seconds between its batches) of the queues whose batches come too far apart for
    their slots to be held through the lulls (`size_for_wait`'s `hold_lulls`): sized for their
    rate as Poisson arrivals, each batch started by the burst term when it lands."""

    @property
    def burst(self) -> bool:
        """More is queued than the fleet sized for the arrivals would have queued."""
        return self.slots > self.steady or self.backlogged


def slots_for_wait(queues: Sequence[QueueLoad], *, service: float,
                   horizon: float = 0.0) -> tuple[int, str]:
    """Slots so each queue with a target meets it, and why (the binding queue)."""
    sizing = size_for_wait(queues, service=service, horizon=horizon)
    return sizing.slots, sizing.why


def size_for_wait(queues: Sequence[QueueLoad], *, service: float,
                  horizon: float = 0.0, startup: float = 0.0,
                  standing: Standing = NO_STANDING,
                  hold_lulls: float | None = None,
                  released_before: frozenset[str] = frozenset(),
                  poll: float = 0.0) -> WaitSizing:
    """`slots_for_wait` with its steady part.

    `service` is the fleet-wide mean service time (used for queues without their own). A
    burst's slots (`_burst_slots`) start it within what is left of the target once the pods
    added for it are up (they take `startup` seconds), each running at least `horizon` seconds
    of it (`waitpolicy.burst_horizon`: pod start-up, at least a poll); the `standing` slots
    count first, from the time each is free.

    `hold_lulls`: the idle seconds a slot held for the next batch may cost (what re-activating
    it costs, and what the user adds); a queue whose batches come further apart than that
    (`QueueLoad.batch_gap`) is sized as Poisson arrivals at its rate between batches
    (`QueueLoad.released`), its batches left to the burst term (`WaitSizing.released`;
    `lull_released`, with `released_before` the queues released on the last sizing). None:
    every queue's batches are held.

    `poll`: seconds to the next decision, for the queues whose target a reaction still meets
    (`reacts_in_time`: rescued tasks, `_rescued_steady`); 0 counts on no reaction."""
    def s_of(q: QueueLoad) -> float:
        return q.service if q.service is not None else service
    released = tuple((q.key, gap) for q in queues
                     if (gap := q.batch_gap()) is not None and hold_lulls is not None
                     and lull_released(gap=gap, budget=hold_lulls,
                                       was_released=q.key in released_before))
    if released:
        gone = {k for k, _ in released}
        queues = [q.released() if q.key in gone else q for q in queues]
    load_total = sum(q.arrival_rate * s_of(q) for q in queues)
    rate_total = sum(q.arrival_rate for q in queues)
    # rates decayed to denormals (half a day idle) give a load that underflows to 0: no mix then
    mix = load_total / rate_total if load_total > 0 else service
    cv2 = _mixed_cv2(queues, s_of, mix)
    best, steadiest, batches, why, backlogged = 0, 0, 0, "", False
    before, queued, work, age = 0.0, 0, 0.0, 0.0
    arrived, batched_arrivals = 0.0, 0.0  # for ca2: the rate-weighted dispersion through q
    trims: list[str] = []
    for i, q in enumerate(queues):
        age = max(age, q.oldest_age)
        through = before + q.arrival_rate * s_of(q)
        arrived += q.arrival_rate
        batched_arrivals += q.arrival_rate * max(1.0, q.arrival_cv2 or 1.0)
        queued += q.queued
        work += q.queued * s_of(q)
        if q.target_wait is not None:
            ca2 = batched_arrivals / arrived if arrived > 0 else 1.0
            batched = batch_slots(load=through, ca2=ca2, service=mix, target=q.target_wait)
            batches = max(batches, batched)
            slots_for = functools.partial(
                slots_for_queue, service=mix, load_before=before, load_through=through,
                load_total=load_total, cv2=cv2, ca2=ca2)
            untrimmed = max(batched, slots_for(target=q.target_wait))
            sized = q.target_wait * max(1.0, q.trim)
            steady = (untrimmed if sized == q.target_wait
                      else max(batched, slots_for(target=sized)))
            reacts = reacts_in_time(target=q.target_wait, startup=startup, poll=poll)
            if reacts:
                steady = max(batched, _rescued_steady(
                    functools.partial(wait_tail, service=mix, load_before=before,
                                      load_through=through, load_total=load_total, cv2=cv2,
                                      ca2=ca2, wait=q.target_wait - startup - poll),
                    load=through, load_total=load_total, most=steady,
                    arrival_rate=q.arrival_rate, rescue=startup + poll))
            # queued beyond a normal fluctuation and batch (a burst) must start within the
            # target as well; normal for the untrimmed fleet (a trimmed one queues more, and a
            # burst term for that would undo the trim)
            normal = (normal_queue(slots=untrimmed, load=load_total)
                      + math.floor(batch_ahead(ca2)))
            excess = queued - normal
            left = q.target_wait - age - startup
            if reacts and left <= poll and excess < 1:
                excess = queued  # rescued: the oldest is due a slot now, short queue or not
            per_task = work / queued if queued else mix
            floor = 0.0 if q.over_budget and left > 0 else horizon
            backlog = math.ceil(through + _burst_slots(
                excess, per_task=per_task, left=left, horizon=floor, startup=startup,
                standing=standing.ranked(per_task=per_task, reserved=through)))
            backlogged = backlogged or math.ceil(through + _burst_slots(
                excess, per_task=per_task, left=left, horizon=floor)) > steady
            behind = _behind_slots(queues[i + 1:], load=through, target=sized, s_of=s_of)
            need = max(steady, backlog, behind)
            steadiest = max(steadiest, steady)
            if need > best:
                best = need
                why = (f"p95 wait of {q.key} <= {q.target_wait:g}s at {q.arrival_rate:.3g}/s"
                       f"{f' in batches of ~{ca2:.3g}' if ca2 > 1 else ''}, S {s_of(q):.3g}s, "
                       f"{queued} queued"
                       f"{' (and a backlog behind it)' if behind > max(steady, backlog) else ''}"
                       f": {need} slots")
            if sized > q.target_wait:
                trims.append(f"{q.key} x{q.trim:.2g} ({untrimmed} -> {steady} steady slots)")
        before = through
    kept = besides_held(standing.held, load=load_total, queued=queued, age=age,
                        due=held_due(queues, startup=startup, poll=poll))
    steadiest = max(steadiest, kept)
    why = (f"{standing.held} slots held by long tasks + more than the load {load_total:.3g} with "
           f"{queued} queued for {age:.3g}s: {kept} slots" if kept > best else why)
    best = max(best, kept)
    if trims:
        why += f"; trimmed by the measured waits: {', '.join(trims)}"
    return WaitSizing(slots=best, steady=steadiest, why=why, batches=batches,
                      backlogged=backlogged, released=released)


def held_due(queues: Sequence[QueueLoad], *, startup: float, poll: float) -> float:
    """How long the oldest queued task may wait before slots held by long tasks are made up
    for (`besides_held`): until a pod asked for on the next poll no longer starts it within the
    tightest target (target - start-up - poll, as a rescue: `reacts_in_time`), and at least a
    poll. Sooner, a backlog behind a held slot is still a fluctuation the free slots may drain
    (on Pareto tasks of 8 s with a 15 s target, making up for every held slot at a poll's wait
    cost 1.5 % more, for p95 waits already well inside the target)."""
    tightest = min((q.target_wait for q in queues if q.target_wait is not None), default=0.0)
    return max(poll, tightest - startup - poll)


def besides_held(held: int, *, load: float, queued: int, age: float, due: float) -> int:
    """The slots a fleet with `held` slots held by long tasks keeps while `queued` tasks wait,
    the oldest for `age` seconds: more than the `load` (erlangs) besides the held ones, once
    that task is `due` (`held_due`; 0 before: the sizing stands)."""
    if not held or not queued or age < due:
        return 0
    return math.floor(load) + 1 + held


LULL_MARGIN = 1.25
"""A queue whose batches are held is released only once their measured gap is this far over
the lull budget, and held again once it is back under the budget (`lull_released`)."""


def lull_released(*, gap: float, budget: float, was_released: bool) -> bool:
    """Whether batches `gap` seconds apart are released rather than held through the lulls
    (the slots for the next batch idle between batches), given the idle seconds a held slot
    may cost (`budget`: `waitpolicy.lull_budget`) and whether they were released on the last
    sizing. Near the budget holding and re-activating cost the same, and the gap is measured
    (the index of dispersion over the rate, both decayed over minutes): batches every ~5 s
    against a 7 s budget read over it on one poll in twelve, and each release left a burst to
    wait a start-up (`nonpoisson.py`'s micro trace, p95 2.43 s against 2 s). So the choice
    changes only when the gap leaves a band around the budget: released over LULL_MARGIN x
    the budget, held again under it."""
    return gap > (budget if was_released else budget * LULL_MARGIN)


def reacts_in_time(*, target: float, startup: float, poll: float) -> bool:
    """A task first seen queued on the next poll (`poll` seconds away; 0: no reaction counted
    on) still starts within `target` on a pod asked for then and up `startup` seconds later."""
    return poll > 0 and target >= startup + poll


def _rescued_steady(tail: Callable[..., float], *, load: float, load_total: float, most: int,
                    arrival_rate: float, rescue: float) -> int:
    """The steady slots (more than `load`, at most `most`) that cost least, counting each
    slot's second and the rescues it leaves: `arrival_rate` x `tail(slots=c)` (the share of
    tasks that wait past the rescue age on c slots) x `rescue` slot-seconds each. Erlang B of
    `load_total` is carried from one count to the next, as `slots_for_queue` does."""
    best, cost = most, math.inf
    c = max(1, math.floor(load) + 1)
    b = _erlang_b(c, load_total)
    while c <= most:
        waiting = _erlang_c_of_b(c, load_total, b)
        total = c + arrival_rate * tail(slots=c, waiting=waiting) * rescue
        if total < cost:
            best, cost = c, total
        c += 1
        b = _next_erlang_b(b, c, load_total)
    return best


def _behind_slots(lower: Sequence[QueueLoad], *, load: float, target: float,
                  s_of: Callable[[QueueLoad], float]) -> int:
    """Slots so that a task of a queue with `target` finds one free in time while the queues
    after it (`lower`) have a backlog. That backlog takes every slot that frees (priority is
    non-preemptive), so such a task waits for the next end of a backlog task: the `load`
    (erlangs) of this queue and those ahead of it holds its own slots, the other c - load end
    tasks of mean S_b (the backlog's) at (c - load) / S_b a second, and P(W > target) =
    exp(-target (c - load) / S_b) <= 5 % takes c >= load + S_b ln 20 / target. Fewer when the
    backlog is smaller than that: `load`, the whole backlog running, and one slot free."""
    waiting = sum(q.queued for q in lower)
    if waiting == 0:
        return 0
    mean = sum(q.queued * s_of(q) for q in lower) / waiting
    by_time = load + mean * TAIL_LOG / target
    return math.ceil(min(by_time, load + waiting + 1))


def _mixed_cv2(queues: Sequence[QueueLoad], s_of: Callable[[QueueLoad], float],
               mix: float) -> float:
    """The squared coefficient of variation of the service time of all arriving tasks (the mix
    of the queues: E[S^2] / E[S]^2 - 1); 1 (exponential) unless every queue with arrivals has
    its own measured."""
    arriving = [q for q in queues if q.arrival_rate > 0]
    if not arriving or mix <= 0 or any(q.cv2 is None for q in arriving):
        return 1.0
    rate = sum(q.arrival_rate for q in arriving)
    second = sum(q.arrival_rate * s_of(q) ** 2 * (1 + (q.cv2 or 0.0)) for q in arriving) / rate
    return max(0.0, second / (mix * mix) - 1)


def _burst_slots(excess: int, *, per_task: float, left: float, horizon: float,
                 startup: float = 0.0, standing: Sequence[tuple[float, float]] = ()) -> float:
    """Slots that start 95 % of a burst of `excess` tasks of `per_task` seconds within w seconds
    of new pods coming up: k new slots start k tasks at once and k / per_task a second after, so
    k (1 + w / per_task) tasks. w is what is left of the target once pods added now are up
    (`left`), but at least `horizon` - per_task: each added slot then runs at least `horizon`
    seconds of the burst (a pod with less work than its start-up costs more than it runs), which
    is also all that is asked once the target is out of reach (`left` <= 0).

    The slots of `standing` ((seconds until free, slots), soonest first) are used first: while
    w is the target's (a deadline), one free u seconds from now starts 1 + (startup + w - u) /
    per_task tasks by then, more than a new one (u = startup); when w is the floor (no
    deadline), as many as a new one; one free only after the deadline (a slot busy with a task
    that runs past it) none, and it stays busy: with new slots needed, it counts in the slots
    returned as they do (the fleet is those and the new ones, not the arrivals' share of it and
    the new ones). They count in the slots returned as far as they are needed; new slots only
    for what they leave."""
    if excess <= 0:
        return 0.0
    window = max(left, horizon - per_task, 0.0)
    tasks, per_new = QUANTILE * excess, 1 + window / per_task
    # without a deadline (the target out of reach, or w the floor) the window is a floor on
    # each added slot's work that moves with every poll: a standing slot then counts as a new
    # one, not for the time until a finish line that is always startup + w away
    if not (left > 0 and window == left):
        return tasks / per_new
    used, held = 0.0, 0.0
    for free_in, slots in standing:
        if tasks <= 0:
            break
        if free_in > startup + window:  # busy past the deadline: held, and no help
            held += slots
            continue
        each = 1 + max(0.0, startup + window - free_in) / per_task
        take = min(slots, tasks / each)
        used, tasks = used + take, tasks - take * each
    return used + (held if tasks > 0 else 0.0) + max(0.0, tasks) / per_new
