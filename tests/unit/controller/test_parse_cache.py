"""`Poller.parse`: a TaskQueue is validated once per metadata.generation; a status write or a
label (same generation) reuses the last poll's, a spec change (a new generation) is read anew."""

from __future__ import annotations

from typing import Any

import pytest

from taskqueue.controller.poller import Poller
from taskqueue.controller.record import Record, SpecError


def body(generation: int | None, *, interval: float = 5, queue: str = "q") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "tq", "namespace": "ns", "uid": "u1",
                            "labels": {"team": "a"}}
    if generation is not None:
        meta["generation"] = generation
    return {"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue", "metadata": meta,
            "spec": {"redis": {"url": "redis://127.0.0.1:1/0"}, "queues": [{"key": queue}],
                     "scaling": {"pollIntervalSeconds": interval}},
            "status": {"totalBacklog": generation}}


def polled(record: Record, poller: Poller, b: dict[str, Any]) -> None:
    """What `Poller.poll` keeps of the TaskQueue it was handed (it needs Redis for the rest)."""
    record.tq, record.generation = poller.parse(record, b), b["metadata"].get("generation")


def test_same_generation_reuses_a_new_generation_reparses() -> None:
    poller = Poller(kube=None)  # type: ignore[arg-type]
    record = Record("ns", "tq")
    polled(record, poller, body(1))
    first = record.tq
    assert poller.parse(record, body(1, interval=9)) is first  # same generation: not read
    again = body(1)
    again["metadata"]["labels"] = {"team": "b"}
    assert poller.parse(record, again) is first
    changed = poller.parse(record, body(2, interval=9))
    assert changed is not first and changed.spec.scaling.pollIntervalSeconds == 9


def test_no_generation_or_nothing_kept_always_parses() -> None:
    poller = Poller(kube=None)  # type: ignore[arg-type]
    record = Record("ns", "tq")
    polled(record, poller, body(None))
    assert poller.parse(record, body(None)) is not record.tq
    fresh = Record("ns", "tq")
    assert poller.parse(fresh, body(1)) is not poller.parse(fresh, body(1))


def test_an_invalid_spec_is_reported_every_time() -> None:
    poller = Poller(kube=None)  # type: ignore[arg-type]
    record = Record("ns", "tq")
    for _ in range(2):
        with pytest.raises(SpecError):
            poller.parse(record, body(3, queue=""))
