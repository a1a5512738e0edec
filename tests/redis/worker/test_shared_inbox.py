"""The thread slots of a worker share one inbox: a delivery the dispatcher fetched for one ready
slot is run by whichever slot asks next, so a slot that finishes while deliveries wait runs the
next one at once instead of blocking (one thread keeps the GIL; no hand-over per task), and the
worker still holds no more than its ready slots asked for. The last slot to become ready makes
the fetch for all on its own thread (no wake-up of the dispatcher); dry queues stay the
dispatcher thread's. Real `Slot` threads (with a recorder of their posts), a real `Dispatcher`
on a real redis-server (end to end: test_batching)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any, cast

import pytest
import redis

from taskqueue.wire import keys
from taskqueue.worker.dispatch import Dispatcher
from taskqueue.worker.plan import plan_for
from taskqueue.worker.slot import Slot
from taskqueue.worker.state import WorkerState
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, make_config, unstarted_dispatcher


class Recorder:
    """Takes the slots' posts; `finished` is True until `closed`."""

    def __init__(self) -> None:
        self.posts: list[tuple[int, list[str]]] = []
        self.closed = False
        self.lock = threading.Lock()

    def finished(self, slot: Any, acks: Sequence[str]) -> bool:
        with self.lock:
            self.posts.append((slot.index, list(acks)))
        return not self.closed


def entry(payload: str) -> str:
    return keys.Entry("q", "0", payload).encode()


def slots(redis_url: str, n: int, handler: Any) -> tuple[list[Slot], Recorder,
                                                         queue.SimpleQueue[list[str] | None]]:
    config = make_config(redis_url, worker={"concurrency": n})
    recorder, inbox = Recorder(), queue.SimpleQueue[list[str] | None]()
    state = WorkerState()
    plan = plan_for(config, coroutine_handler=False)
    made = [Slot(config=config, plan=plan, handler=handler, state=state,
                 dispatcher=cast(Dispatcher, recorder), index=i, inbox=inbox)
            for i in range(n)]
    return made, recorder, inbox


def test_a_delivery_is_run_by_the_slot_that_asks_next(redis_url: str) -> None:
    ran: list[tuple[str, str]] = []

    def handler(payload: str, _ctx: object) -> None:
        ran.append((threading.current_thread().name, payload))

    (first, second), recorder, _ = slots(redis_url, 2, handler)
    # two deliveries, fetched for the two ready slots; only the first slot's thread runs
    first.deliver([entry("a")])
    second.deliver([entry("b")])
    first.thread.start()
    wait_for("both run", lambda: len(ran) == 2, timeout=5)
    assert ran == [("slot-0", "a"), ("slot-0", "b")]
    # it posted itself ready three times (start, after a, after b), each time with its acks
    wait_for("third post", lambda: len(recorder.posts) == 3, timeout=5)
    assert recorder.posts == [(0, []), (0, [entry("a")]), (0, [entry("b")])]
    recorder.closed = True
    second.deliver(None)
    first.thread.join(5)
    assert not first.thread.is_alive()


def test_one_end_per_waiting_slot_ends_them_all(redis_url: str) -> None:
    made, recorder, inbox = slots(redis_url, 4, lambda payload, ctx: None)
    for slot in made:
        slot.thread.start()
    wait_for("4 slots waiting", lambda: len(recorder.posts) == 4, timeout=5)
    recorder.closed = True
    for slot in made:
        slot.deliver(None)
    for slot in made:
        slot.thread.join(5)
    assert not any(slot.thread.is_alive() for slot in made)
    assert inbox.empty()


@pytest.mark.parametrize("slots_", [2, 8])
def test_blocking_handlers_still_run_all_slots_at_once(redis_sync: redis.Redis,
                                                       make_worker: MakeWorker,
                                                       slots_: int) -> None:
    """A slot busy in a handler leaves the deliveries to the others: every slot starts a
    task before any task ends (none waits behind a busy slot in the shared inbox)."""
    redis_sync.lpush("q", *[f"t{i}:3" for i in range(slots_)])
    make_worker(handler="tests.helpers.handlers:note_start_sleep_then_record",
                worker={"concurrency": slots_})
    wait_for(f"{slots_} started", lambda: redis_sync.llen("test:started") == slots_, timeout=10)
    assert redis_sync.llen("test:done") == 0


class Receiving:
    """A ready slot as the dispatcher sees it: records its deliveries and on which thread."""

    def __init__(self) -> None:
        self.want = 1
        self.got: list[tuple[str, list[str] | None]] = []

    def deliver(self, entries: list[str] | None) -> None:
        self.got.append((threading.current_thread().name, entries))


def test_the_last_slot_to_become_ready_fetches_for_all_on_its_own_thread(
        redis_url: str, redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", *[f"t{i}" for i in range(20)])
    d, receivers = unstarted_dispatcher(redis_url, slots=4), [Receiving() for _ in range(4)]
    for r in receivers[:3]:  # the dispatcher thread is not started: nobody else fetches
        assert d.finished(r, [])
    assert d.calls == 0 and all(not r.got for r in receivers)
    assert d.finished(receivers[3], [])
    assert d.calls == 1  # one call, for the four
    me = threading.current_thread().name
    assert [(r.got[0][0], len(r.got[0][1] or [])) for r in receivers] == [(me, 1)] * 4
    assert redis_sync.llen("q:processing:w1") == 4
    d.close()


def test_dry_queues_are_left_to_the_dispatcher_thread(redis_url: str,
                                                      redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", "only")
    d, receivers = unstarted_dispatcher(redis_url, slots=2), [Receiving() for _ in range(2)]
    for r in receivers:
        d.finished(r, [])
    assert d.calls == 1  # asked 2, got 1: the queues are dry
    given = [r for r in receivers if r.got]
    assert len(given) == 1
    redis_sync.lpush("q", "next")
    assert d.finished(given[0], [])  # all ready again, but dry: no call here
    assert d.calls == 1
    d.close()
