"""What the operator knows about one TaskQueue between polls: one `Record` per TaskQueue.

The record lives in kopf's per-object memo (`handlers.record_of`), so kopf drops it with the
object; `Records` indexes the live ones by (namespace, name) for the reaper, which runs on pod
events (another object's memo) and needs the TaskQueue's spec, uid and Redis URL. The poller
(`taskqueue.controller.poller`) is the one writer of a record; the handlers only set `wake`.
"""

from __future__ import annotations

import asyncio
import weakref
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from taskqueue.api import manifest, models
from taskqueue.controller import journal, schedules
from taskqueue.scaling import policy
from taskqueue.wire import keys


class SpecError(Exception):
    """A TaskQueue the schema accepted but the operator cannot act on; names field and fix."""


def parse(body: dict[str, Any]) -> models.TaskQueue:
    """The TaskQueue in `body`; SpecError (naming field and fix) when it does not validate."""
    try:
        return manifest.parse(body)
    except (manifest.ManifestError, ValidationError) as e:
        raise SpecError(f"invalid spec: {e}") from None


def key_of(tq: models.TaskQueue) -> tuple[str, str]:
    return (tq.metadata.namespace or "default", tq.metadata.name)


@dataclass(eq=False)
class Record:
    """One TaskQueue: its last spec, where its Redis is, the policy state and the last status."""

    namespace: str
    name: str
    uid: str = ""
    tq: models.TaskQueue | None = None
    """The spec of the last poll (None before the first)."""
    generation: int | None = None
    """metadata.generation of `tq`: a poll of the same generation reuses `tq` (`Poller.parse`)."""
    schema: keys.KeySchema | None = None
    """The key names of `tq`."""
    url: str = ""
    """The Redis URL of the last poll (resolved from the Secret, if any)."""
    state: policy.PolicyState | None = None
    """The policy's state after the last poll (`policy.decide` writes it)."""
    last_scale: float | None = None
    """When a poll last changed the replica count (status.lastScaleTime)."""
    status: dict[str, Any] | None = None
    """The status last written (or read from the object)."""
    status_written: float | None = None
    last_error: str | None = None
    """The last problem reported (an Event is posted when it changes)."""
    journal: journal.Journal = field(default_factory=journal.Journal)
    """What the history and the decision log need from poll to poll."""
    history_error: str | None = None
    """The last refusal of a history write (an Event is posted when it changes)."""
    refused: dict[str, str | None] = field(default_factory=dict)
    """Per write condition (`status.WRITES`), the last refusal reported (None: none, or the
    write went through since): an Event is posted when it changes."""
    schedules_seen: dict[str, int | None] = field(default_factory=dict)
    """Per schedule, the `through` Redis held after the last fire.lua call (`schedules`)."""
    fired: dict[str, schedules.Fired] = field(default_factory=dict)
    """Per schedule, what the last fire.lua call that reached it said."""
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the spec changed: the daemon polls at once instead of waiting its interval."""


class Records:
    """The live records by (namespace, name); a record kopf forgot disappears from here too."""

    def __init__(self) -> None:
        self._live: weakref.WeakValueDictionary[tuple[str, str], Record] = (
            weakref.WeakValueDictionary())

    def add(self, record: Record) -> Record:
        self._live[(record.namespace, record.name)] = record
        return record

    def get(self, namespace: str, name: str) -> Record | None:
        return self._live.get((namespace, name))

    def all(self) -> list[Record]:
        return list(self._live.values())

    def discard(self, record: Record) -> None:
        if self._live.get((record.namespace, record.name)) is record:
            del self._live[(record.namespace, record.name)]
