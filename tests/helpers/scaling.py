"""One `policy.decide` poll of a small fixed queue: 1 task/s of 2 s tasks over the last 120 s,
one task queued, six pods up. The unit tests that ask what the policy makes of that queue's
service spread (`tests/unit/scaling/test_priced_cv2.py`) and of its measured waits
(`tests/unit/scaling/test_wait_trim.py`) build it here, so both describe the same traffic."""

from __future__ import annotations

from taskqueue.api.models import ScalingSpec
from taskqueue.scaling.observation import QueueObservation
from taskqueue.scaling.policy import Decision, PolicyState, decide
from taskqueue.scaling.rates import Rates
from taskqueue.scaling.service import ServiceTimes
from taskqueue.scaling.waits import Waits

NOW = 1_000_000.0


def one_poll(*, spec: ScalingSpec, cv2: float = 9.0, waits_before: Waits | None = None,
             waited: tuple[int, ...] | None = None,
             trims: tuple[tuple[str, float], ...] = (),
             startup: float | None = None, replicas: int = 6) -> Decision:
    """The decision on queue "tasks" (service cv2 `cv2`): `waits_before`, the wait histograms
    the policy held; `waited`, the workers' histogram now (`QueueObservation.waited`);
    `trims`, the trims so far; `startup`, the measured pod start-up; `replicas`, the pods the
    Deployment asks for (no worker is registered: at 0, the fleet is at zero)."""
    squares = 1000 * 4.0 * (1 + cv2)
    rates = Rates(at=NOW - 120, backlog=(("tasks", 0),), taken=(("tasks", 0),),
                  service=ServiceTimes(totals=(("tasks", 2000.0, 1000),),
                                       totals_sq=(("tasks", squares, 1000),),
                                       sums=(("tasks", 600.0, 300.0),),
                                       sums_sq=(("tasks", squares * 0.3, 300.0),)),
                  waits=waits_before or Waits())
    observation = QueueObservation(at=NOW, backlog={"tasks": 1}, taken={"tasks": 119},
                                   service={"tasks": (2000.0, 1000)},
                                   service_sq={"tasks": (squares, 1000)},
                                   waited={} if waited is None else {"tasks": waited})
    state = PolicyState(replicas=replicas, rates=rates, wait_trims=trims, startup=startup)
    return decide(spec=spec, observation=observation, state=state, now=NOW, concurrency=1,
                  queue_order=("tasks",))
