"""The bridge between the dispatcher's thread and the coroutine slots' loop crosses in batches:
the deliveries of one fetch wake the loop once, the slots that finish in one loop iteration
post in one `finished_many` (one dispatcher wake-up), and after the dispatcher closed each of
them acks on its own; when the last coroutines running finish, the loop makes the fetch for all
itself. A real event loop in its thread; the dispatcher is a recorder, or a real one on a real
redis-server (end to end: test_async_slots and test_batching)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any, cast

import pytest
import redis

from taskqueue.worker.aslot import AsyncSlot, Bridge
from taskqueue.worker.dispatch import Dispatcher
from taskqueue.worker.ledger import Ledger
from taskqueue.worker.state import WorkerState
from tests.helpers.worker import unstarted_dispatcher


class Recorder:
    """What the bridge calls on the dispatcher."""

    def __init__(self, *, closed: bool = False) -> None:
        self.closed = closed
        self.calls: list[tuple[list[Any], list[str]]] = []

    def finished_many(self, slots: Sequence[Any], acks: Sequence[str]) -> bool:
        self.calls.append((list(slots), list(acks)))
        return not self.closed


class FakeSlot:
    def __init__(self, name: str, bridge: Bridge) -> None:
        self.name = name
        self.bridge = bridge
        self.began: list[list[str] | None] = []
        self.ledger = Ledger(held=True, state=WorkerState())
        self.alone = False

    def begin(self, entries: list[str] | None) -> None:
        self.began.append(entries)

    def finish_alone(self) -> None:
        self.alone = True


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def on_loop(loop: asyncio.AbstractEventLoop, fn: Any) -> Any:
    async def call() -> Any:
        return fn()
    return asyncio.run_coroutine_threadsafe(call(), loop).result(5)


def counting_wakeups(loop: asyncio.AbstractEventLoop) -> list[int]:
    count = [0]
    real = loop.call_soon_threadsafe

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)
    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    return count


def make(loop: asyncio.AbstractEventLoop, n: int, *, closed: bool = False,
         ) -> tuple[Bridge, Recorder, list[FakeSlot]]:
    recorder = Recorder(closed=closed)
    bridge = Bridge(dispatcher=cast(Dispatcher, recorder), loop=loop)
    return bridge, recorder, [FakeSlot(f"s{i}", bridge) for i in range(n)]


@pytest.mark.parametrize("n", [1, 8, 50])
def test_the_deliveries_of_one_fetch_wake_the_loop_once(loop: asyncio.AbstractEventLoop,
                                                        n: int) -> None:
    bridge, _, slots = make(loop, n)
    wakeups = counting_wakeups(loop)
    hold = threading.Event()
    loop.call_soon_threadsafe(hold.wait, 5)  # the loop is busy while the dispatcher hands out
    wakeups[0] = 0
    for i, slot in enumerate(slots):
        bridge.deliver(cast(AsyncSlot, slot), [f"e{i}"])
    assert wakeups[0] == 1
    hold.set()
    on_loop(loop, lambda: None)
    assert [slot.began for slot in slots] == [[[f"e{i}"]] for i in range(n)]


def test_a_delivery_after_the_loop_took_the_batch_wakes_it_again(
        loop: asyncio.AbstractEventLoop) -> None:
    bridge, _, (first, second) = make(loop, 2)
    bridge.deliver(cast(AsyncSlot, first), ["a"])
    on_loop(loop, lambda: None)
    bridge.deliver(cast(AsyncSlot, second), None)  # the stop, for the other slot
    on_loop(loop, lambda: None)
    assert first.began == [["a"]] and second.began == [None]


def test_slots_finishing_in_one_iteration_post_together_with_all_their_acks(
        loop: asyncio.AbstractEventLoop) -> None:
    bridge, recorder, slots = make(loop, 3)
    slots[0].ledger.acks, slots[2].ledger.acks = ["a0"], ["c0", "c1"]

    def finish_all() -> None:
        for slot in slots:
            bridge.post(cast(AsyncSlot, slot))
    on_loop(loop, finish_all)
    on_loop(loop, lambda: None)
    assert recorder.calls == [(slots, ["a0", "c0", "c1"])]
    assert all(slot.ledger.acks == [] and not slot.alone for slot in slots)
    on_loop(loop, lambda: bridge.post(cast(AsyncSlot, slots[1])))  # a later iteration
    on_loop(loop, lambda: None)
    assert recorder.calls[1] == ([slots[1]], [])


def test_after_the_dispatcher_closed_each_slot_acks_its_own(
        loop: asyncio.AbstractEventLoop) -> None:
    bridge, recorder, slots = make(loop, 2, closed=True)
    slots[0].ledger.acks = ["a0"]
    on_loop(loop, lambda: [bridge.post(cast(AsyncSlot, s)) for s in slots])
    on_loop(loop, lambda: None)
    assert len(recorder.calls) == 1
    assert all(slot.alone for slot in slots)
    assert slots[0].ledger.acks == ["a0"]  # kept for its own final ack


class LoopSlot(FakeSlot):
    """A coroutine slot as the dispatcher sees it too: `deliver` goes through the bridge."""

    want = 1

    def deliver(self, entries: list[str] | None) -> None:
        self.bridge.deliver(cast(AsyncSlot, self), entries)


def test_when_the_last_coroutines_finish_the_loop_fetches_for_all(
        loop: asyncio.AbstractEventLoop, redis_url: str, redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", *[f"t{i}" for i in range(10)])
    d = unstarted_dispatcher(redis_url, slots=3)
    bridge = Bridge(dispatcher=d, loop=loop)
    slots = [LoopSlot(f"s{i}", bridge) for i in range(3)]
    on_loop(loop, lambda: bridge.post(cast(AsyncSlot, slots[0])))  # one is still running
    on_loop(loop, lambda: None)
    assert d.calls == 0
    on_loop(loop, lambda: [bridge.post(cast(AsyncSlot, s)) for s in slots[1:]])
    on_loop(loop, lambda: None)
    on_loop(loop, lambda: None)
    assert d.calls == 1  # one call for the three, made on the loop
    assert [len(s.began[0] or []) for s in slots] == [1, 1, 1]
    assert redis_sync.llen("q:processing:w1") == 3
    d.close()
