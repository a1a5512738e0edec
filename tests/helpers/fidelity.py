"""Simulator fidelity on the real node: replay a trace at real time, record what the operator and
the worker pods did, and run `taskqueue simulate` on the same trace and manifest.

Used by `bench/scaling/fidelity.py` (the 10-minute run, the plot) and by
`tests/node/e2e/test_fidelity.py` (a reduced trace, the same tolerances). The trace has four
parts: steady traffic, a burst, a lull and a batch of tasks at once, then steady traffic again.
Each task's payload is `<index> <service seconds>`; the handler (`e2etasks.tasks:timed`, in the
node tests' handler image) writes its start time to the hash `FIDELITY_STARTED` and sleeps the
service time, so a wait is that start minus the time this process pushed the task (one host
clock). The recorder watches the worker pods and the Deployment through the API server (the
time each event arrives here), the workers zset (when each pod's worker registered) and, at the
end, the operator's decision log (when each poll decided a change).

Worker-seconds are billed as the simulator bills them: from a pod's creation to its removal
(its worker exited). Max replicas counts the pods not being deleted, as the simulator's live pods.
"""

from __future__ import annotations

import csv
import json
import math
import os
import random
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from taskqueue import client as tq_client
from taskqueue.simulate import world
from taskqueue.simulate.trace import Arrival
from taskqueue.wire import history, keyspace

FIDELITY_STARTED = "fidelity:started"
"""Hash: task index -> the unix time its handler started (written by the handler)."""
HANDLER = "e2etasks.tasks:timed"
TOLERANCE = 0.15
"""Worker-seconds and p95 wait: the simulation within this fraction of the real run."""
REPLICA_TOLERANCE = 1
"""Max replicas: the simulation within this many pods of the real run."""
POD_STARTUP = 5.0
"""The manifest's scaling.podStartupSeconds."""


@dataclass(frozen=True)
class Shape:
    """The trace's four parts, in seconds and tasks/s; `steady2` follows the batch."""

    steady: float = 180.0
    steady_rate: float = 1.2
    burst: float = 60.0
    burst_rate: float = 3.0
    lull: float = 180.0
    lull_rate: float = 0.02
    batch: int = 40
    steady2: float = 180.0
    steady2_rate: float = 0.6
    service: float = 2.0
    """Mean service seconds (exponential, capped at 5 x the mean)."""

    @property
    def duration(self) -> float:
        return self.steady + self.burst + self.lull + self.steady2


FULL = Shape()
"""The 10-minute trace of docs/benchmarks.md."""
REDUCED = Shape(steady=45.0, burst=30.0, lull=30.0, lull_rate=0.0, batch=8, steady2=45.0)
"""The 2.5-minute trace of the node test. Its batch is 5 % of the tasks: with more, the p95 is the
batch's tail alone, which moves 2x with the node's pod start-up under the machine's load (25 of
177 tasks: a p95 of 6-11 s over the start-ups measured here)."""


def make_trace(shape: Shape, *, queue: str, seed: int = 34) -> list[Arrival]:
    """The arrivals of `shape` on `queue`: Poisson parts and one batch at the end of the lull."""
    rng = random.Random(seed)

    def service() -> float:
        return round(min(5 * shape.service, rng.expovariate(1 / shape.service)), 3)

    out: list[Arrival] = []
    start = 0.0
    for length, rate in ((shape.steady, shape.steady_rate), (shape.burst, shape.burst_rate),
                         (shape.lull, shape.lull_rate)):
        t = start
        while rate > 0:
            t += rng.expovariate(rate)
            if t >= start + length:
                break
            out.append(Arrival(round(t, 3), queue, service()))
        start += length
    out += [Arrival(start, queue, service()) for _ in range(shape.batch)]
    t = start
    while shape.steady2_rate > 0:
        t += rng.expovariate(shape.steady2_rate)
        if t >= start + shape.steady2:
            break
        out.append(Arrival(round(t, 3), queue, service()))
    return sorted(out, key=lambda a: a.at)


def batch_phase(m: Measured, shape: Shape, arrivals: Sequence[Arrival], tq: dict[str, Any],
                ) -> float:
    """The simulator's first poll matching the real operator's poll phase at the batch."""
    return m.poll_phase(shape.steady + shape.burst + shape.lull,
                        interval=float(tq["spec"]["scaling"]["pollIntervalSeconds"]),
                        origin=arrivals[0].at)


def write_csv(arrivals: Sequence[Arrival], path: Path) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["enqueued_at", "queue", "service_seconds"])
        w.writerows([a.at, a.queue, a.service] for a in arrivals)


def manifest(*, name: str, namespace: str, redis_url: str, image: str, queue: str,
             startup: float) -> dict[str, Any]:
    """The TaskQueue replayed on the node and simulated: concurrency 1, p95 target 5 s."""
    return {
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "redis": {"url": redis_url},
            "queues": [{"key": queue}],
            "worker": {"image": image, "handler": HANDLER, "concurrency": 1,
                       "terminationGracePeriodSeconds": 10, "heartbeatSeconds": 2,
                       "env": [{"name": "FIDELITY_REDIS_URL", "value": redis_url}]},
            "scaling": {"minReplicas": 0, "maxReplicas": 8, "pollIntervalSeconds": 2,
                        "targetWaitSeconds": {queue: 5}, "idleCooldownSeconds": 20,
                        "podStartupSeconds": startup},
        },
    }


@dataclass
class PodLife:
    """One worker pod as this process saw it (unix seconds; None: not seen)."""

    name: str
    added: float
    ready: float | None = None
    registered: float | None = None
    deleting: float | None = None
    gone: float | None = None


@dataclass(frozen=True)
class Delays:
    """The simulator's cluster model (`taskqueue simulate --startup --startup-per-pod
    --api-delay --exit-delay`)."""

    startup: float = world.NODE_STARTUP_SECONDS
    per_pod: float = world.NODE_STARTUP_PER_POD_SECONDS
    api: float = world.API_DELAY_SECONDS
    exit: float = world.EXIT_SECONDS

    def flags(self) -> list[str]:
        return ["--startup", f"{self.startup:.3f}", "--startup-per-pod", f"{self.per_pod:.3f}",
                "--api-delay", f"{self.api:.3f}", "--exit-delay", f"{self.exit:.3f}"]


@dataclass
class Measured:
    """What the real run recorded."""

    start: float
    """Unix time of the trace's 0."""
    end: float
    """Unix time the recording stopped (the fleet back at zero, or the timeout)."""
    enqueued: dict[str, float]
    started: dict[str, float]
    pods: list[PodLife]
    replicas: list[tuple[float, int]]
    """(seconds from the start, Deployment spec.replicas) at each change."""
    decisions: list[tuple[float, int, int]]
    """(seconds from the start, from, to) of each replica change the operator decided."""
    push_lag_max: float
    """The latest push behind the trace (a loaded machine shows here)."""
    load: tuple[float, float]
    """The 1-minute load average at the start and at the end."""
    notes: list[str] = field(default_factory=list)
    """The first: the trace's shape and the manifest's podStartupSeconds (`note_setting`), which
    `bench/scaling/fidelity.py compare` replays."""

    def note_setting(self, shape: Shape, *, pod_startup: float) -> None:
        self.notes.append(json.dumps({"shape": asdict(shape), "pod_startup": pod_startup}))

    def setting(self) -> tuple[Shape, float]:
        """The trace's shape and podStartupSeconds `note_setting` noted."""
        noted = json.loads(self.notes[0])
        return Shape(**noted["shape"]), float(noted["pod_startup"])

    @classmethod
    def load_json(cls, path: Path) -> Measured:
        raw = json.loads(path.read_text())
        raw["pods"] = [PodLife(**p) for p in raw["pods"]]
        raw["replicas"] = [tuple(r) for r in raw["replicas"]]
        raw["decisions"] = [tuple(d) for d in raw["decisions"]]
        raw["load"] = tuple(raw["load"])
        return cls(**raw)

    def dump_json(self, path: Path) -> None:
        path.write_text(self.to_json(indent=1))

    def to_json(self, *, indent: int | None = None) -> str:
        return json.dumps(asdict(self), indent=indent)

    # -- the figures compared ------------------------------------------------------------------
    def worker_seconds(self) -> float:
        """Pod-seconds from creation to removal; a pod whose removal no event showed (deleted,
        then not seen again) until its deletion plus the median exit."""
        exit_ = median(self.exits())
        return sum((p.gone or (p.deleting + exit_ if p.deleting else self.end)) - p.added
                   for p in self.pods)

    def waits(self) -> list[float]:
        """Each task's wait; a task never started waits until the end."""
        return [self.started.get(i, self.end) - at for i, at in self.enqueued.items()]

    def p95(self) -> float:
        return percentile(self.waits(), 0.95)

    def max_replicas(self) -> int:
        """The most pods alive and not being deleted at once."""
        events = sorted([(p.added, 1) for p in self.pods]
                        + [(p.deleting or p.gone or self.end, -1) for p in self.pods])
        live = peak = 0
        for _, step in events:
            live += step
            peak = max(peak, live)
        return peak

    def unserved(self) -> int:
        return sum(1 for i in self.enqueued if i not in self.started)

    # -- the calibration -----------------------------------------------------------------------
    def startups(self) -> list[float]:
        """Seconds from a pod's creation to its worker registered."""
        return [p.registered - p.added for p in self.pods if p.registered is not None]

    def exits(self) -> list[float]:
        """Seconds from an idle pod's deletion to its removal (drained ones hold no task)."""
        return [p.gone - p.deleting for p in self.pods
                if p.gone is not None and p.deleting is not None and p.gone > p.deleting]

    def api_delays(self) -> list[float]:
        """Seconds from a scale-up decision (the poll's clock) to its first new pod."""
        out = []
        added = sorted(p.added - self.start for p in self.pods)
        for at, before, after in self.decisions:
            if after > before:
                later = [a for a in added if a >= at - 0.05]
                if later:
                    out.append(later[0] - at)
        return out

    def startup_fit(self) -> tuple[float, float]:
        """(alone, per other pod): the least-squares line through each pod's start-up against
        how many other pods were created within a second of it (started at the same time),
        neither below 0 (a run whose pods all started together has no slope to fit)."""
        points = [(sum(1 for q in self.pods if q is not p and abs(q.added - p.added) < 1.0),
                   p.registered - p.added) for p in self.pods if p.registered is not None]
        if not points:
            return world.NODE_STARTUP_SECONDS, world.NODE_STARTUP_PER_POD_SECONDS
        n = len(points)
        mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
        sxx = sum((x - mx) ** 2 for x, _ in points)
        slope = max(0.0, sum((x - mx) * (y - my) for x, y in points) / sxx if sxx else 0.0)
        return max(0.0, my - slope * mx), slope

    def delays(self) -> Delays:
        """The cluster's delays as this run measured them: the simulator is calibrated on the
        node as it was during the run (its load moves the pods' start-up 2x), not on another
        run's constants."""
        alone, per_pod = self.startup_fit()
        api, exits = self.api_delays(), self.exits()
        return Delays(startup=alone, per_pod=per_pod,
                      api=median(api) if api else world.API_DELAY_SECONDS,
                      exit=median(exits) if exits else world.EXIT_SECONDS)

    def poll_phase(self, at: float, *, interval: float, origin: float) -> float:
        """Where the real operator's polls fell in the interval at `at` (seconds from the
        start): its first scale-up decided at or after `at`, as a first-poll time for the
        simulator, whose time 0 is the first arrival (`origin` seconds after the start)."""
        ups = [t for t, before, after in self.decisions if t >= at and after > before]
        return (ups[0] - origin) % interval if ups else 0.0

    def timeline(self, every: float = 1.0) -> list[tuple[float, int]]:
        """(seconds from the start, live pods) every `every` seconds."""
        out, t = [], 0.0
        while self.start + t <= self.end:
            now = self.start + t
            live = sum(1 for p in self.pods
                       if p.added <= now < (p.deleting or p.gone or self.end + 1))
            out.append((t, live))
            t += every
        return out


def percentile(values: Sequence[float], q: float) -> float:
    """The simulator's percentile (`taskqueue.simulate.run.percentile`): nearest rank."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def median(values: Sequence[float]) -> float:
    return percentile(values, 0.5)


class Recorder:
    """Watches the worker pods and the Deployment of TaskQueue `name`, and the workers zset."""

    def __init__(self, *, kubeconfig: Path, namespace: str, name: str,
                 r: redis.Redis, prefix: str) -> None:
        api = k8s_config.new_client_from_config(config_file=str(kubeconfig))
        self.core, self.apps = k8s.CoreV1Api(api), k8s.AppsV1Api(api)
        self.namespace, self.name = namespace, name
        self.r, self.workers_key = r, keyspace.bookkeeping_key(prefix, "workers")
        self.pods: dict[str, PodLife] = {}
        self.replicas: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=f, daemon=True)
                        for f in (self._watch_pods, self._watch_deployment, self._sample)]

    def __enter__(self) -> Recorder:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=15)

    def live(self) -> int:
        with self.lock:
            return sum(1 for p in self.pods.values() if p.gone is None)

    def _watch_pods(self) -> None:
        """Pod events from one resourceVersion on, so none is missed between two streams; a
        pod gone while no stream was open is seen by the list that starts the next one."""
        selector = f"taskqueue.dev/taskqueue={self.name}"
        version: str | None = None
        while not self.stop.is_set():
            if version is None:
                listed = self.core.list_namespaced_pod(self.namespace, label_selector=selector)
                now, names = time.time(), {p.metadata.name for p in listed.items}
                with self.lock:
                    for life in self.pods.values():
                        if life.gone is None and life.name not in names:
                            life.gone, life.deleting = now, life.deleting or now
                for pod in listed.items:
                    self._pod_event("ADDED", pod, now)
                version = listed.metadata.resource_version
            w = k8s_watch.Watch()
            try:
                for event in w.stream(self.core.list_namespaced_pod, self.namespace,
                                      label_selector=selector, timeout_seconds=5,
                                      resource_version=version):
                    self._pod_event(event["type"], event["object"], time.time())
                    if self.stop.is_set():
                        w.stop()
                version = w.resource_version
            except k8s.ApiException as e:  # 410 Gone: list again
                if e.status != 410:
                    raise
                version = None

    def _pod_event(self, kind: str, pod: Any, now: float) -> None:
        name = pod.metadata.name
        with self.lock:
            life = self.pods.get(name)
            if life is None:
                if kind == "DELETED":
                    return
                life = self.pods[name] = PodLife(name, now)
            if life.deleting is None and pod.metadata.deletion_timestamp is not None:
                life.deleting = now
            ready = any(c.type == "Ready" and c.status == "True"
                        for c in (pod.status.conditions or []))
            if ready and life.ready is None:
                life.ready = now
            if kind == "DELETED" and life.gone is None:
                life.gone = now
                life.deleting = life.deleting or now

    def _watch_deployment(self) -> None:
        selector = f"metadata.name={self.name}-worker"
        while not self.stop.is_set():
            w = k8s_watch.Watch()
            for event in w.stream(self.apps.list_namespaced_deployment, self.namespace,
                                  field_selector=selector, timeout_seconds=5):
                replicas = int(event["object"].spec.replicas or 0)
                with self.lock:
                    if not self.replicas or self.replicas[-1][1] != replicas:
                        self.replicas.append((time.time(), replicas))
                if self.stop.is_set():
                    w.stop()

    def _sample(self) -> None:
        while not self.stop.wait(0.2):
            now = time.time()
            names = {n.decode() if isinstance(n, bytes) else str(n)
                     for n in self.r.zrange(self.workers_key, 0, -1)}
            with self.lock:
                for name in names:
                    life = self.pods.get(name)
                    if life is not None and life.registered is None:
                        life.registered = now


def replay(arrivals: Sequence[Arrival], *, r: redis.Redis, queue: str, start: float) -> float:
    """Push each task at `start` + its arrival time (a batch in one push); the latest push's lag
    behind the trace. Records the push times in the hash `fidelity:enqueued`."""
    lag, i = 0.0, 0
    while i < len(arrivals):
        j = i
        while j < len(arrivals) and arrivals[j].at == arrivals[i].at:
            j += 1
        delay = start + arrivals[i].at - time.time()
        if delay > 0:
            time.sleep(delay)
        now = time.time()
        lag = max(lag, now - start - arrivals[i].at)
        payloads = [f"{k} {arrivals[k].service}" for k in range(i, j)]
        tq_client.enqueue_many_sync(r, queue, payloads)
        r.hset("fidelity:enqueued", mapping={str(k): repr(now) for k in range(i, j)})
        i = j
    return lag


def record(arrivals: Sequence[Arrival], *, kubeconfig: Path, namespace: str, name: str,
           r: redis.Redis, queue: str, settle_timeout: float = 180.0) -> Measured:
    """Replay `arrivals` at real time against the applied TaskQueue `name` and record until its
    fleet is back at zero (or `settle_timeout` seconds after the last task finished)."""
    load0 = os.getloadavg()[0]
    with Recorder(kubeconfig=kubeconfig, namespace=namespace, name=name, r=r,
                  prefix=queue) as rec:
        start = time.time() + 1.0
        lag = replay(arrivals, r=r, queue=queue, start=start)
        deadline = time.time() + settle_timeout
        while time.time() < deadline:
            if r.hlen(FIDELITY_STARTED) >= len(arrivals) and rec.live() == 0 and rec.pods:
                break
            time.sleep(0.5)
        end = time.time()
    started = {k.decode(): float(v) for k, v in r.hgetall(FIDELITY_STARTED).items()}
    enqueued = {k.decode(): float(v) for k, v in r.hgetall("fidelity:enqueued").items()}
    raw = r.xrange(keyspace.bookkeeping_key(queue, "decisions"))
    decisions = [(d.t / 1000 - start, d.previous, d.replicas)
                 for _, d in history.decisions(raw) if d.replicas != d.previous]
    return Measured(start=start, end=end, enqueued=enqueued, started=started,
                    pods=list(rec.pods.values()),
                    replicas=[(t - start, n) for t, n in rec.replicas],
                    decisions=decisions, push_lag_max=lag, load=(load0, os.getloadavg()[0]))


@dataclass(frozen=True)
class Simulated:
    worker_seconds: float
    p95: float
    max_replicas: int
    unserved: int
    timeline: list[tuple[float, int]]
    runs: int = 1
    """How many simulated runs the figures are the median of (`simulate_around`)."""
    p95_range: tuple[float, float] | None = None
    """The lowest and highest p95 wait of those runs."""


def simulate(arrivals: Sequence[Arrival], tq: dict[str, Any], *, delays: Delays,
             poll_phase: float = 0.0) -> Simulated:
    """`taskqueue simulate` (the CLI, as a user runs it) on the same trace and manifest, with
    the cluster's delays the real run measured (`Measured.delays`) and its first poll at
    `poll_phase` seconds after the first arrival."""
    with tempfile.TemporaryDirectory() as tmp:
        trace_csv, manifest_yaml = Path(tmp) / "trace.csv", Path(tmp) / "tq.yaml"
        timeline_csv = Path(tmp) / "timeline.csv"
        write_csv(arrivals, trace_csv)
        manifest_yaml.write_text(yaml.safe_dump(tq))
        argv = ["taskqueue", "simulate", "-f", str(manifest_yaml), "--trace", str(trace_csv),
                "--compare", "", "--json", "--timeline", str(timeline_csv),
                *delays.flags(), "--poll-phase", f"{poll_phase:.3f}"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
        [result] = json.loads(proc.stdout)
        rows = list(csv.DictReader(timeline_csv.open()))
    return Simulated(
        worker_seconds=float(result["worker_seconds"]),
        p95=max(w["p95"] for w in result["wait_seconds"].values()),
        max_replicas=int(result["max_replicas"]), unserved=int(result["unserved_tasks"]),
        timeline=[(float(row["time"]), int(row["replicas"])) for row in rows])


PHASE_SPREAD = 0.5
"""`simulate_around` runs the simulation with its first poll this many seconds either side of
the real run's poll phase at the batch (`batch_phase`), in steps of PHASE_STEP."""
PHASE_STEP = 0.1


def phases_around(phase: float, *, interval: float, spread: float = PHASE_SPREAD,
                  step: float = PHASE_STEP) -> list[float]:
    """The poll phases from `phase` - `spread` to `phase` + `spread` in steps of `step`, each
    within the poll interval; `phase` itself in the middle. Pure."""
    n = round(spread / step)
    return [(phase + k * step) % interval for k in range(-n, n + 1)]


def summarise(runs: Sequence[Simulated]) -> Simulated:
    """The simulated figures of several runs of one trace: the median worker-seconds, p95 wait
    and max replicas, the most tasks any run left unserved, the p95s' range and the middle
    run's timeline. Pure."""
    if not runs:
        raise ValueError("no simulated runs to summarise")
    p95s = [s.p95 for s in runs]
    return Simulated(
        worker_seconds=statistics.median(s.worker_seconds for s in runs),
        p95=statistics.median(p95s),
        max_replicas=statistics.median_low(s.max_replicas for s in runs),
        unserved=max(s.unserved for s in runs),
        timeline=runs[len(runs) // 2].timeline, runs=len(runs),
        p95_range=(min(p95s), max(p95s)))


def simulate_around(arrivals: Sequence[Arrival], tq: dict[str, Any], *, delays: Delays,
                    poll_phase: float) -> Simulated:
    """The simulation's figures for a real run whose polls fell at `poll_phase` at the batch
    (`batch_phase`): the median of runs with the first poll within PHASE_SPREAD seconds of it
    (`phases_around`, `summarise`). A batch's waits move with where it lands in the poll
    interval, a chance the simulation should share; but one simulated run is one draw: a poll
    0.1 s earlier sees a task fewer or a heartbeat's report later, another branch of the policy
    is taken, and the p95 of the node test's trace moves by up to 20 % (docs/benchmarks.md,
    "Simulator fidelity on the real node"), while the real run's own timing is known no closer
    (pods that start 0.6-1.6 s after their creation, polls that drift 0.1 s over the run)."""
    interval = float(tq["spec"]["scaling"]["pollIntervalSeconds"])
    return summarise([simulate(arrivals, tq, delays=delays, poll_phase=phase)
                      for phase in phases_around(poll_phase, interval=interval)])


def quantile_band(values: Sequence[float], q: float, *, z: float = 1.645) -> tuple[float, float]:
    """Where the `q` quantile of the population that `values` were drawn from lies, with about
    90 % confidence (`z` 1.645): the order statistics at ranks
    n*q -/+ z*sqrt(n*q*(1-q)), distribution-free. Of 171 waits the p95 is the 163rd and its
    band runs from the 157th to the 168th: the p95 of a run this short is known no closer than
    that. Pure."""
    if not values:
        return 0.0, 0.0
    ordered, n = sorted(values), len(values)
    half = z * math.sqrt(n * q * (1 - q))
    lo = max(0, math.floor(n * q - half) - 1)
    hi = min(n - 1, math.ceil(n * q + half) - 1)
    return ordered[lo], ordered[hi]


@dataclass(frozen=True)
class Check:
    figure: str
    real: float
    simulated: float
    within: bool
    """Within the figure's tolerance of the real run."""
    band: tuple[float, float] | None = None
    """For a percentile: the real run's confidence band of it (`quantile_band`)."""

    @property
    def off(self) -> str:
        return f"{self.simulated / self.real - 1:+.1%}" if self.real else "n/a"

    @property
    def in_band_only(self) -> bool:
        """Outside the tolerance, but inside the real run's own band of the figure."""
        return not self.within and self.band is not None and (
            self.band[0] <= self.simulated <= self.band[1])

    @property
    def ok(self) -> bool:
        return self.within or self.in_band_only


def compare(m: Measured, s: Simulated) -> list[Check]:
    """Worker-seconds within TOLERANCE, max replicas within REPLICA_TOLERANCE; the p95 wait
    within TOLERANCE, or inside the real run's 90 % band of its p95 (`quantile_band`): on a
    short run that band is as wide as the tolerance, and a simulated p95 inside it is one the
    real run could have shown."""
    ws, p95 = m.worker_seconds(), m.p95()
    return [
        Check("worker-seconds", ws, s.worker_seconds,
              abs(s.worker_seconds - ws) <= TOLERANCE * ws),
        Check("p95 wait (s)", p95, s.p95, abs(s.p95 - p95) <= TOLERANCE * p95,
              band=quantile_band(m.waits(), 0.95)),
        Check("max replicas", m.max_replicas(), s.max_replicas,
              abs(s.max_replicas - m.max_replicas()) <= REPLICA_TOLERANCE),
    ]


def _verdict(c: Check) -> str:
    if c.in_band_only and c.band is not None:
        return f"band {c.band[0]:.2f}-{c.band[1]:.2f}"
    return "yes" if c.ok else "NO"


def report(m: Measured, s: Simulated, checks: Sequence[Check]) -> str:
    lines = [f"{'figure':<16} {'real':>9} {'simulated':>10} {'off':>7}  within"]
    lines += [f"{c.figure:<16} {c.real:>9.2f} {c.simulated:>10.2f} {c.off:>7}  "
              f"{_verdict(c)}" for c in checks]
    lines += [f"{c.figure} of the real run, 90 % band: {c.band[0]:.2f}-{c.band[1]:.2f} s"
              for c in checks if c.band is not None]
    if s.runs > 1 and s.p95_range is not None:
        lines.append(f"simulated: the median of {s.runs} runs with the first poll within "
                     f"{PHASE_SPREAD:g} s of the real run's poll phase at the batch; their p95 "
                     f"wait {s.p95_range[0]:.2f}-{s.p95_range[1]:.2f} s")
    st, ex, api = m.startups(), m.exits(), m.api_delays()
    d = m.delays()
    lines.append(
        f"tasks {len(m.enqueued)} (unserved real {m.unserved()}, simulated {s.unserved}); "
        f"pods {len(m.pods)}; push lag max {m.push_lag_max:.2f} s; "
        f"load average {m.load[0]:.1f} -> {m.load[1]:.1f}")
    lines.append(
        f"measured: pod creation -> worker registered median {median(st):.2f} s "
        f"(min {min(st, default=0):.2f}, max {max(st, default=0):.2f}, n {len(st)}); "
        f"decision -> pod created median {median(api):.2f} s (n {len(api)}); "
        f"deletion -> pod removed median {median(ex):.2f} s (n {len(ex)}); start-up fit "
        f"{d.startup:.2f} s + {d.per_pod:.2f} s per other pod starting")
    return "\n".join(lines)
