"""The scalers the simulator compares: this operator, and KEDA's Redis list scaler + the HPA.

`OperatorScaler` polls as `taskqueue.controller.poller` does: every pollIntervalSeconds it observes,
carries the `PolicyState` over with the Deployment's replica count, calls `policy.decide` with the
same arguments, and scales in as the controller does: `quiesce.plan_scale_in`, the quiesced set
written, the victims' processing lists read after, `Plan.settle` (remove only drained ones), the
count set being `policy.Outcome.replicas`. With `quiesce=False` (a baseline without quiesce):
deletion costs from the snapshot, then scale. Kubernetes writes land `api_delay` seconds after
the poll (measured: `world.API_DELAY_SECONDS`).

`KedaScaler` models KEDA 2.x with the HPA (AverageValue target): KEDA polls the list lengths
every `pollingInterval`, activates 0 -> 1 and deactivates to 0 after `cooldownPeriod` without
activity; the HPA syncs every 15 s, wants ceil(length / listLength) per trigger (one trigger per
queue, the largest wins, 10 % tolerance), scales up by at most max(100 %, 4 pods) per sync and
down to the highest recommendation of its stabilisation window. It sees queued tasks only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from taskqueue.api.models import TaskQueue
from taskqueue.scaling import policy, quiesce
from taskqueue.scaling.observation import QueueObservation
from taskqueue.simulate.world import API_DELAY_SECONDS, World
from taskqueue.wire import flow


@dataclass(frozen=True)
class KedaConfig:
    """A ScaledObject's settings (KEDA's defaults unless said)."""

    name: str = "keda"
    polling_interval: float = 30.0
    cooldown_period: float = 300.0
    stabilization_window: float = 300.0
    list_length: int = 5
    hpa_sync: float = 15.0


KEDA_DEFAULTS = KedaConfig()
KEDA_TUNED = KedaConfig(name="keda-tuned", polling_interval=5.0, cooldown_period=30.0,
                        stabilization_window=30.0)


class OperatorScaler:
    """This operator's poll loop around the real policy and scale-in."""

    def __init__(self, tq: TaskQueue, *, quiesce: bool = True,
                 api_delay: float = API_DELAY_SECONDS, first_poll: float = 0.0) -> None:
        self.name = "operator" if quiesce else "operator-no-quiesce"
        self.spec = tq.spec.scaling
        self.concurrency = tq.spec.worker.concurrency
        self.order = tuple(q.key for q in tq.spec.queues)
        self.flow = flow.declared(tq.spec.queues)
        self.quiesce, self.api_delay = quiesce, api_delay
        self.state: policy.PolicyState | None = None
        self.next_poll = first_poll
        """The first poll's time: where the trace's events fall in the poll interval."""
        self.pending: list[tuple[float, int]] = []

    def tick(self, world: World, t: float) -> None:
        due = [r for at, r in self.pending if at <= t]
        self.pending = [(at, r) for at, r in self.pending if at > t]
        for replicas in due:
            world.scale(replicas, t)
        if t + 1e-9 >= self.next_poll:
            self.next_poll += self.spec.pollIntervalSeconds
            self.poll(world, t)

    def poll(self, world: World, t: float) -> None:
        observation = world.observe(t)
        current = world.spec_replicas
        state = replace(self.state or policy.PolicyState(replicas=0), replicas=current)
        decision = policy.decide(spec=self.spec, observation=observation, state=state, now=t,
                                 concurrency=self.concurrency, queue_order=self.order,
                                 flow=self.flow)
        if self.quiesce:
            target = policy.Outcome(decision, self._scale_in(
                world, t, current, decision.replicas, observation)).replicas
        else:
            target = decision.replicas
            if target < current:
                held = {w.worker_id: w.in_flight for w in observation.workers}
                world.set_costs({p.name: str(held.get(p.name, 0)) for p in world.live()})
        self.state = decision.state
        if target != current:
            self.pending.append((t + self.api_delay, target))

    @staticmethod
    def _scale_in(world: World, t: float, current: int, target: int,
                  observation: QueueObservation) -> quiesce.Settled:
        """The operator's scale-in (`quiesce.plan_scale_in`, `Plan.settle`) acted on the world
        as the controller's actor acts on Redis and the API: the quiesced set written, the
        victims' processing lists read after, the pod-deletion-costs set."""
        pods = (world.pod_views(t) if quiesce.needs_pods(target=target, current=current,
                                                          observation=observation) else [])
        plan = quiesce.plan_scale_in(target=target, current=current, observation=observation,
                                     pods=pods)
        after: dict[str, int] = {}
        if plan.writes:
            world.set_quiesced((observation.quiesced | set(plan.quiesce)) - set(plan.release))
            held = world.held(t)  # read after quiescing: nothing can join a drained victim
            after = {name: held.get(name, 0) for name in plan.quiesce}
        if plan.settled is not None:
            return plan.settled
        world.set_costs(plan.costs(after))
        return plan.settle(after, annotated=True)


class KedaScaler:
    """KEDA's Redis list scaler and the HPA it drives."""

    def __init__(self, tq: TaskQueue, config: KedaConfig = KEDA_DEFAULTS) -> None:
        self.name = config.name
        self.config = config
        self.min = tq.spec.scaling.minReplicas
        self.max = tq.spec.scaling.maxReplicas
        self.last_active: float | None = None
        self.next_poll = 0.0
        self.next_sync = 0.0
        self.history: list[tuple[float, int]] = []

    def tick(self, world: World, t: float) -> None:
        if t + 1e-9 >= self.next_poll:
            self.next_poll += self.config.polling_interval
            self._keda(world, t)
        if t + 1e-9 >= self.next_sync:
            self.next_sync += self.config.hpa_sync
            if world.spec_replicas > 0:
                self._hpa(world, t)

    def _keda(self, world: World, t: float) -> None:
        active = any(len(d) > 0 for d in world.queues.values())
        if active:
            self.last_active = t
            if world.spec_replicas == 0:
                world.scale(max(1, self.min), t)
        elif (world.spec_replicas > 0 and self.min == 0 and self.last_active is not None
              and t - self.last_active >= self.config.cooldown_period):
            world.scale(0, t)
            self.history = []

    def _hpa(self, world: World, t: float) -> None:
        current = world.spec_replicas
        desired = max(self._wanted(len(d), current) for d in world.queues.values())
        desired = min(self.max, max(1, self.min, desired))
        window = self.config.stabilization_window
        self.history = [(at, r) for at, r in self.history if t - at < window]
        self.history.append((t, desired))
        if desired > current:
            new = min(desired, max(2 * current, current + 4))
        else:
            new = min(current, max(r for _, r in self.history))
        if new != current:
            world.scale(new, t)

    def _wanted(self, length: int, current: int) -> int:
        ratio = length / (self.config.list_length * current)
        if abs(ratio - 1) <= 0.1:
            return current
        return math.ceil(length / self.config.list_length)
