"""The simulated cluster: queues, worker pods with concurrency slots, the ReplicaSet. Pure.

Time advances in ticks; inside a tick, start times are exact (a task starts at the latest of its
arrival, its slot becoming free and its pod becoming ready), so waits are not rounded to a tick.
A pod is billed from creation until its worker exits; it takes tasks `startup` seconds after
its creation, plus `startup_per_pod` for each other pod starting with it (one small node), and a
drained pod told to stop exits `exit_delay` seconds later (the delays measured on the real node
are the constants below). Scale-down follows the ReplicaSet's
deletion ranking: not-ready pods first, then the lowest pod-deletion-cost, then the newest. A
deleted pod gets SIGTERM: its worker takes nothing more and finishes what it holds within the
grace period; what is still running then is interrupted (requeued at the head, counted). A
quiesced pod takes nothing. Dispatch: "pack" gives a task to a free slot of the pod with the most
busy slots (the worker fetches from busy pods first), "spread" to a random free slot (a race).
Workers report each queue's service seconds and attempts, and the histogram of its tasks' waits,
with their heartbeat: the observation sees the totals as of the last heartbeat (every
`heartbeat` seconds).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from taskqueue.scaling.observation import QueueObservation, WorkerObservation
from taskqueue.scaling.quiesce import RUNNING_READY, PodView, replicaset_rank
from taskqueue.simulate.flowsim import FlowSim
from taskqueue.simulate.trace import Arrival
from taskqueue.wire.keys import WAIT_EDGES_SECONDS, edges_below

Dispatch = Literal["pack", "spread"]

# The cluster's delays, measured on the real node (kubelet, containerd, runc, the chart's
# operator as a pod, images cached; a shared 2-core machine) by bench/scaling/fidelity.py
# (bench/scaling/fidelity/, docs/benchmarks.md "Simulator fidelity on the real node"). The
# defaults below come from those runs (API and exit: medians; start-up: the loaded run's
# least-squares line); a pod's start-up there moves 2x with the machine's load, so the
# fidelity harness simulates each run with the delays that run measured (`--startup`,
# `--startup-per-pod`, `--api-delay`, `--exit-delay`).
API_DELAY_SECONDS = 0.1
"""A poll's decision to the new pod object: the Deployment write, the deployment and replicaset
controllers. The pod is billed from then."""
EXIT_SECONDS = 1.8
"""An idle pod deleted by the ReplicaSet to its removal: SIGTERM, the worker's deregistration
and exit, the kubelet's clean-up. Billed until then."""
NODE_STARTUP_SECONDS = 1.6
"""A pod created to its worker registered, alone on that node (`--startup` there; 0.8-1.6 s
measured, with the machine's load)."""
NODE_STARTUP_PER_POD_SECONDS = 0.8
"""What each other pod starting on the node at the same time adds to a pod's start-up
(`--startup-per-pod` there; the least-squares line with NODE_STARTUP_SECONDS): 6 pods created
at once took 3.5-6.9 s, one 1.0-2.2 s. A cluster whose pods land on several nodes spreads this;
the default start-up (`POD_STARTUP_SECONDS`, a pull or a node to wait for) leaves it out."""
POD_STARTUP_SECONDS = 5.0
"""The default start-up (`--startup`): a cluster that pulls the image or waits for a node takes
longer than the measured node (NODE_STARTUP_SECONDS), and its pods start in parallel."""

STARTING = replicaset_rank(scheduled=True, phase="Pending", ready=False)
"""The ReplicaSet's rank of a pod whose worker is not up yet (it holds no task then)."""


@dataclass
class Task:
    at: float
    queue: str
    service: float
    end: float = 0.0
    retry: bool = False
    """Requeued after an interruption: its wait was counted when it first started."""


@dataclass
class Pod:
    name: str
    created: float
    ready_at: float
    slots: list[Task | None]
    free_at: list[float]
    quiesced: bool = False
    sigterm_at: float | None = None
    gone_at: float | None = None
    cost: int = 0

    def running(self, t: float) -> int:
        return sum(1 for s in self.slots if s is not None and s.end > t)

    def started_ms(self, t: float) -> tuple[int, ...]:
        """When its running tasks started (unix ms), oldest first, as its heartbeat reports."""
        return tuple(sorted(int((s.end - s.service) * 1000) for s in self.slots
                            if s is not None and s.end > t))

    def rank(self, t: float) -> int:
        """`quiesce.replicaset_rank` at `t`: starting until ready, then Running and Ready."""
        return RUNNING_READY if self.ready_at <= t else STARTING

    def in_flight(self) -> int:
        return sum(1 for s in self.slots if s is not None)


@dataclass
class Counters:
    """What the run measured."""

    waits: dict[str, list[float]] = field(default_factory=dict)
    completed: int = 0
    taken: dict[str, int] = field(default_factory=dict)
    interrupted: int = 0
    busy_deleted: int = 0
    deleted: int = 0
    last_completion: float = 0.0
    service: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Per queue: seconds run and attempts, as workers add them to the stats hash."""
    service_sq: dict[str, tuple[float, int]] = field(default_factory=dict)
    """Per queue: the sum of the squared attempt times (seconds^2) and the attempts."""
    waited: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Per queue: the wait histogram workers add to the stats hash (`keys.wait_fields`)."""

    def started(self, task: Task, wait: float) -> None:
        """A task's first start: its wait, and the histogram the workers report."""
        self.waits.setdefault(task.queue, []).append(wait)
        counts = self.waited.get(task.queue, (0,) * (len(WAIT_EDGES_SECONDS) + 1))
        over = 1 + edges_below(wait)
        self.waited[task.queue] = (*(n + 1 for n in counts[:over]), *counts[over:])

    def served(self, task: Task) -> None:
        seconds, attempts = self.service.get(task.queue, (0.0, 0))
        self.service[task.queue] = (seconds + task.service, attempts + 1)
        squares, _ = self.service_sq.get(task.queue, (0.0, 0))
        self.service_sq[task.queue] = (squares + task.service ** 2, attempts + 1)


class World:
    """Queues and pods; `advance(t)` runs the work up to time t."""

    def __init__(self, trace: list[Arrival], *, queues: list[str], concurrency: int,
                 startup: float, grace: float, dispatch: Dispatch = "pack",
                 seed: int = 1, heartbeat: float = 5.0, flow: FlowSim | None = None,
                 horizon: float = 0.0, exit_delay: float = 0.0,
                 startup_per_pod: float = 0.0) -> None:
        self.trace, self.next = trace, 0
        self.flow = flow
        """The queues' rate and in-flight limits and pauses (None: no queue has one)."""
        self.horizon = horizon
        """Scheduled arrivals due within this many seconds are observed as due soon."""
        self.order = queues
        self.queues: dict[str, deque[Task]] = {q: deque() for q in queues}
        self.concurrency, self.startup, self.grace = concurrency, startup, grace
        self.exit_delay = exit_delay
        """Seconds a drained pod takes to be gone after SIGTERM (billed)."""
        self.startup_per_pod = startup_per_pod
        """Seconds each other pod starting at the same time adds to a pod's start-up."""
        self.dispatch = dispatch
        self.rng = random.Random(seed)
        self.pods: list[Pod] = []
        self.spec_replicas = 0
        self.counters = Counters(waits={q: [] for q in queues}, taken=dict.fromkeys(queues, 0))
        self._names = 0
        self.worker_seconds = 0.0
        self.now = 0.0
        self.heartbeat = heartbeat
        self.reported: dict[str, tuple[float, int]] = {}
        """The service totals as of the last heartbeat (what observe.lua reads)."""
        self.reported_sq: dict[str, tuple[float, int]] = {}
        self.reported_waited: dict[str, tuple[int, ...]] = {}
        self._next_beat = heartbeat

    def has_work(self) -> bool:
        """Tasks are still to arrive, queued or in flight."""
        return (self.next < len(self.trace) or any(self.queues.values())
                or any(p.in_flight() for p in self.pods))

    def unserved(self, t: float) -> dict[str, list[float]]:
        """Per queue, how long each task never started by `t` has waited so far."""
        return {q: [t - task.at for task in d if not task.retry]
                for q, d in self.queues.items() if d}

    def unfinished(self) -> int:
        """Tasks queued or in flight."""
        return (sum(len(d) for d in self.queues.values())
                + sum(p.in_flight() for p in self.pods))

    # -- the ReplicaSet -----------------------------------------------------------------------
    def live(self) -> list[Pod]:
        """Pods the ReplicaSet counts (not terminating)."""
        return [p for p in self.pods if p.sigterm_at is None]

    def scale(self, replicas: int, t: float) -> None:
        self.spec_replicas = replicas
        live = self.live()
        new = replicas - len(live)
        starting = sum(1 for p in live if p.ready_at > t) + new
        startup = self.startup + self.startup_per_pod * max(0, starting - 1)
        for _ in range(new):
            self._names += 1
            self.pods.append(Pod(f"pod-{self._names}", t, t + startup,
                                 [None] * self.concurrency, [t + startup] * self.concurrency))
        if len(live) > replicas:
            ranked = sorted(live, key=lambda p: (p.rank(t), p.cost, -p.created))
            for pod in ranked[:len(live) - replicas]:
                self._terminate(pod, t)

    def _terminate(self, pod: Pod, t: float) -> None:
        pod.sigterm_at = t
        self.counters.deleted += 1
        if pod.running(t) > 0:
            self.counters.busy_deleted += 1

    def set_costs(self, costs: Mapping[str, str]) -> None:
        for pod in self.live():
            if pod.name in costs:
                pod.cost = int(costs[pod.name])

    def set_quiesced(self, names: Iterable[str]) -> None:
        chosen = set(names)
        for pod in self.pods:
            pod.quiesced = pod.name in chosen

    # -- observation ---------------------------------------------------------------------------
    def observe(self, t: float) -> QueueObservation:
        """What observe.lua would return at `t`."""
        workers = tuple(  # a drained pod told to stop has deregistered
            WorkerObservation(p.name, int((t + 15) * 1000), p.running(t), p.started_ms(t))
            for p in self.pods if p.gone_at is None and p.ready_at <= t
            and (p.sigterm_at is None or p.in_flight())
        )
        return QueueObservation(
            at=t, backlog={q: len(d) for q, d in self.queues.items()},
            completed_total=self.counters.completed, workers=workers,
            oldest_enqueued_at={q: d[0].at for q, d in self.queues.items() if d},
            taken=dict(self.counters.taken), service=dict(self.reported),
            service_sq=dict(self.reported_sq), waited=dict(self.reported_waited),
            quiesced=frozenset(p.name for p in self.pods if p.quiesced and p.gone_at is None),
            due_soon=self._due_soon(t),
        )

    def _due_soon(self, t: float) -> int:
        """Scheduled arrivals not yet arrived and due by `t` + the horizon (fired ahead)."""
        n, i = 0, self.next
        while i < len(self.trace) and self.trace[i].at <= t + self.horizon:
            n += self.trace[i].scheduled
            i += 1
        return n

    def pod_views(self, t: float) -> list[PodView]:
        return [PodView(p.name, p.running(t), p.created, p.rank(t)) for p in self.live()]

    def held(self, t: float) -> dict[str, int]:
        return {p.name: p.running(t) for p in self.pods if p.gone_at is None}

    # -- time ----------------------------------------------------------------------------------
    def advance(self, t: float) -> None:
        """Arrivals, completions, dispatch, SIGTERM/grace and billing up to `t`."""
        while self.next < len(self.trace) and self.trace[self.next].at <= t:
            a = self.trace[self.next]
            self.queues.setdefault(a.queue, deque()).append(Task(a.at, a.queue, a.service))
            self.next += 1
        self._dispatch(t)
        self._complete(t)
        self._exit(t)
        if t >= self._next_beat:  # workers add their service totals with each heartbeat
            self.reported = dict(self.counters.service)
            self.reported_sq = dict(self.counters.service_sq)
            self.reported_waited = dict(self.counters.waited)
            self._next_beat += self.heartbeat
        self.worker_seconds += len(self.pods) * (t - self.now)
        self.pods = [p for p in self.pods if p.gone_at is None]
        self.now = t

    def _complete(self, t: float) -> None:
        for pod in self.pods:
            for i, task in enumerate(pod.slots):
                if task is not None and task.end <= t:
                    pod.slots[i] = None
                    self.counters.completed += 1
                    self.counters.served(task)
                    self.counters.last_completion = max(self.counters.last_completion, task.end)

    def _exit(self, t: float) -> None:
        for pod in self.pods:
            if pod.sigterm_at is None or pod.gone_at is not None:
                continue
            deadline = pod.sigterm_at + self.grace
            if pod.in_flight() == 0:
                if t >= pod.sigterm_at + self.exit_delay:
                    pod.gone_at = t
            elif t >= deadline:
                for i, task in enumerate(pod.slots):
                    if task is not None:
                        self.counters.interrupted += 1
                        self.queues[task.queue].appendleft(Task(task.at, task.queue,
                                                                task.service, retry=True))
                        pod.slots[i] = None
                pod.gone_at = deadline

    def _next_task(self, t: float) -> Task | None:
        """The first task by priority among the queues the flow limits let start by `t`."""
        for q in self.order:
            d = self.queues.get(q)
            if d and (self.flow is None or self.flow.allows(q, t, running=self._running(q, t))):
                return d[0]
        return None

    def _running(self, queue: str, t: float) -> int:
        return sum(1 for p in self.pods for s in p.slots
                   if s is not None and s.queue == queue and s.end > t)

    def _dispatch(self, t: float) -> None:
        while True:
            task = self._next_task(t)
            if task is None or task.at > t:
                return
            choice = self._free_slot(t, task.at)
            if choice is None:
                return
            pod, i, start = choice
            if self.flow is not None:
                start = self.flow.start(task.queue, start)
            self.queues[task.queue].popleft()
            task.end = start + task.service
            done = pod.slots[i]
            if done is not None:  # finished inside this tick: count it now
                self.counters.completed += 1
                self.counters.served(done)
            pod.slots[i], pod.free_at[i] = task, task.end
            self.counters.taken[task.queue] = self.counters.taken.get(task.queue, 0) + 1
            if not task.retry:
                self.counters.started(task, start - task.at)

    def _free_slot(self, t: float, arrival: float) -> tuple[Pod, int, float] | None:
        best: tuple[tuple[float, ...], Pod, int, float] | None = None
        for pod in self.pods:
            if pod.sigterm_at is not None or pod.quiesced or pod.ready_at > t:
                continue
            for i, free in enumerate(pod.free_at):
                if free > t:
                    continue
                start = max(free, arrival, pod.ready_at)
                rank = self._rank(pod, start)
                if best is None or rank < best[0]:
                    best = (rank, pod, i, start)
        return None if best is None else best[1:]

    def _rank(self, pod: Pod, start: float) -> tuple[float, ...]:
        if self.dispatch == "pack":
            return (start, -pod.running(start), self.rng.random())
        return (start, self.rng.random())
