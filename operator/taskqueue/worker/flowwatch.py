"""The `flow` thread: keeps the worker's `flowseen.FlowSeen` fresh, so that a fetch looks at the
flow hashes only when some flow control exists, and the blocking pops leave paused queues out.

Each step is one `EXISTS <prefix>:flow <prefix>:flowstate` (and, when either exists, one
`HGETALL <prefix>:flow` for the pauses), every `CHECK_SECONDS`: a few commands a second per
worker instead of one more read in every fetch. How soon a change takes effect:
- while either hash exists, fetch.lua reads them atomically in every fetch, as before, so a
  pause written then holds from the next fetch of every worker;
- a pause or limit written into a TaskQueue that had none holds after at most `CHECK_SECONDS`
  plus the fetch in flight (the target is one second);
- a blocking pop (AtMostOnce, BRPOP/BZPOPMIN) leaves a paused queue out from its next pop, at
  most `CHECK_SECONDS` plus `slot.BLOCK_SECONDS` after the pause.
A flow hash of another type leaves `on` True: fetch.lua then names it (WRONGTYPE), as it always
did. The thread is a `periodic.Periodic` (Redis errors retried with backoff, `on` unchanged).
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
"""How often the worker reads whether flow control exists, and the pauses."""
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
        """Read whether flow control exists and what it pauses; the seconds to the next read."""
        schema, seen = self.schema, self.seen
        if not int(self.store.call("EXISTS", schema.flow, schema.flow_state)):
            seen.paused = frozenset()
            seen.on = False
            return CHECK_SECONDS
        try:
            seen.paused = paused_keys(schema, self.store.call("HGETALL", schema.flow))
        except ReplyError as exc:
            if not wrongtype.is_wrong_type(exc):
                raise
            seen.paused = frozenset()  # fetch.lua names the key; BRPOP cannot read it either
        seen.on = True
        return CHECK_SECONDS
