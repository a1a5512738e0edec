"""The `flow` thread: keeps the worker's `flowseen.FlowSeen` fresh, so that the blocking pops
leave paused queues out.

Each step is one `HGETALL <prefix>:flow` every `CHECK_SECONDS`. The fetch script needs none of
it: fetch.lua reads the flow hashes itself, atomically, in every fetch (one `EXISTS` when there
are none), so a limit or pause holds from the next fetch of every worker. A blocking pop
(AtMostOnce, BRPOP/BZPOPMIN) leaves a paused queue out from its next pop, at most
`CHECK_SECONDS` plus `slot.BLOCK_SECONDS` after the pause. A flow hash of another type leaves
nothing paused here (fetch.lua names it: WRONGTYPE; BRPOP cannot read it either). The thread is
a `periodic.Periodic` (Redis errors retried with backoff, `paused` unchanged).
"""

from __future__ import annotations

import threading
from typing import Any

from taskqueue.wire import flow, keys
from taskqueue.worker import wrongtype
from taskqueue.worker.flowseen import FlowSeen
from taskqueue.worker.periodic import Periodic
from taskqueue.worker.resp import ReplyError
from taskqueue.worker.store import Store

CHECK_SECONDS = 0.5
"""How often the worker reads the pauses."""
RETRY_CAP_SECONDS = 1.0
"""Longest wait between two reads while Redis fails."""


def paused_keys(schema: keys.KeySchema, control: Any) -> frozenset[str]:
    """The queue keys the control hash pauses (an HGETALL reply: a dict or a flat list). Pure."""
    if not isinstance(control, dict):
        control = dict(zip(control[::2], control[1::2], strict=True))
    fields = {str(k): str(v) for k, v in control.items()}
    return frozenset(q.key for q in flow.read(schema.queue_keys, fields, {}) if q.is_paused)


class FlowWatch:
    """The `flow` thread of one worker process; it ends when the worker stops."""

    def __init__(self, *, url: str, schema: keys.KeySchema, worker_id: str, seen: FlowSeen,
                 stopping: threading.Event) -> None:
        self.schema = schema
        self.seen = seen
        self.store = Store(url=url, schema=schema, worker_id=worker_id)
        self.loop = Periodic(name="flow", what="flow control read", step=self.step,
                             stop=stopping, cap=RETRY_CAP_SECONDS, close=self.store.close)

    def step(self) -> float:
        """Read what the flow hash pauses; the seconds to the next read."""
        try:
            self.seen.paused = paused_keys(self.schema,
                                           self.store.call("HGETALL", self.schema.flow))
        except ReplyError as exc:
            if not wrongtype.is_wrong_type(exc):
                raise
            self.seen.paused = frozenset()
        return CHECK_SECONDS
