"""The flow limits in the simulated cluster: what `lua/lib/flow.lua` enforces in Redis, for the
simulator's dispatch. Pure. The limits hold whatever scales the fleet (they are in Redis); only
this operator's policy knows them (`scaling.flowcap`), the KEDA models do not."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from taskqueue.wire.flow import QueueFlow


@dataclass
class FlowSim:
    """Each queue's limits and its rate limit's theoretical arrival time (GCRA, seconds)."""

    flows: dict[str, QueueFlow]
    tat: dict[str, float] = field(default_factory=dict)

    @classmethod
    def of(cls, flows: Sequence[QueueFlow]) -> FlowSim | None:
        limited = {q.key: q for q in flows if q.limited}
        return cls(limited) if limited else None

    def allows(self, queue: str, t: float, *, running: int) -> bool:
        """A task of `queue` may start by `t` with `running` of its tasks held."""
        q = self.flows.get(queue)
        if q is None:
            return True
        if q.is_paused or (q.max_in_flight is not None and running >= q.max_in_flight):
            return False
        if q.rate is None:
            return True
        _, tau = self._rate(q)
        return self.tat.get(queue, t) - t <= tau + 1e-9

    def start(self, queue: str, start: float) -> float:
        """The start of a task of `queue` a free slot could start at `start` (later when the
        rate limit says so; `allows` was True), its start counted."""
        q = self.flows.get(queue)
        if q is None or q.rate is None:
            return start
        period, tau = self._rate(q)
        tat = self.tat.get(queue, start)
        start = max(start, tat - tau)
        self.tat[queue] = max(tat, start) + period
        return start

    @staticmethod
    def _rate(q: QueueFlow) -> tuple[float, float]:
        assert q.rate is not None
        tasks, per, burst = q.rate
        period = per / tasks
        return period, (burst - 1) * period
