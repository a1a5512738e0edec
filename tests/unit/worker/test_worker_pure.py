"""Pure parts of the worker: the tracking prefixes, the fetch gate (SharedExclusiveLock), the
share of a batched fetch per slot and the fetch strategy."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from taskqueue.wire import keys
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.dispatch import share
from taskqueue.worker.fetching import fetch_mode
from taskqueue.worker.state import SharedExclusiveLock
from taskqueue.worker.wakeup import tracking_prefixes


@pytest.mark.parametrize(
    ("keys", "prefixes"),
    [
        pytest.param([], [], id="none"),
        pytest.param(["q"], ["q"], id="one"),
        pytest.param(["b", "a", "a"], ["a", "b"], id="sorted-deduplicated"),
        pytest.param(["jobs", "jobs:hi", "jobs:lo"], ["jobs"], id="prefix-covers-others"),
        pytest.param(["jobs:hi", "jobs:lo"], ["jobs:hi", "jobs:lo"], id="siblings-kept"),
        pytest.param(["a", "ab", "abc", "b"], ["a", "b"], id="chain"),
    ],
)
def test_tracking_prefixes(keys: list[str], prefixes: list[str]) -> None:
    assert tracking_prefixes(keys) == prefixes


def _blocks(lock: SharedExclusiveLock, acquire: Callable[[SharedExclusiveLock], None]) -> bool:
    """True when `acquire` does not return within 0.2 s (it is left to finish in a thread)."""
    got = threading.Event()

    def run() -> None:
        acquire(lock)
        got.set()

    threading.Thread(target=run, daemon=True).start()
    return not got.wait(0.2)


def _shared(lock: SharedExclusiveLock) -> None:
    lock.acquire_shared()


def _exclusive(lock: SharedExclusiveLock) -> None:
    with lock.exclusive():
        pass


def _hold_exclusive(lock: SharedExclusiveLock) -> Callable[[], None]:
    entered, leave = threading.Event(), threading.Event()

    def run() -> None:
        with lock.exclusive():
            entered.set()
            leave.wait(5)

    threading.Thread(target=run, daemon=True).start()
    assert entered.wait(2)
    return leave.set


@pytest.mark.parametrize(
    ("shared_held", "exclusive_held", "attempt", "blocks"),
    [
        pytest.param(0, False, _shared, False, id="shared-when-free"),
        pytest.param(2, False, _shared, False, id="shared-alongside-shared"),
        pytest.param(0, False, _exclusive, False, id="exclusive-when-free"),
        pytest.param(1, False, _exclusive, True, id="exclusive-waits-for-shared"),
        pytest.param(0, True, _shared, True, id="shared-waits-for-exclusive"),
        pytest.param(0, True, _exclusive, True, id="exclusive-waits-for-exclusive"),
    ],
)
def test_shared_exclusive_lock(shared_held: int, exclusive_held: bool,
                               attempt: Callable[[SharedExclusiveLock], None],
                               blocks: bool) -> None:
    lock = SharedExclusiveLock()
    for _ in range(shared_held):
        lock.acquire_shared()
    release = _hold_exclusive(lock) if exclusive_held else None
    try:
        assert _blocks(lock, attempt) is blocks
    finally:
        for _ in range(shared_held):
            lock.release_shared()
        if release:
            release()


def test_a_waiting_exclusive_holder_is_not_starved_by_new_shared_ones() -> None:
    lock = SharedExclusiveLock()
    lock.acquire_shared()
    exclusive_done = threading.Event()

    def exclusive() -> None:
        with lock.exclusive():
            exclusive_done.set()

    threading.Thread(target=exclusive, daemon=True).start()
    assert not exclusive_done.wait(0.1)  # waits for the shared holder
    assert _blocks(lock, _shared)  # a new shared holder queues behind the waiting writer
    lock.release_shared()
    assert exclusive_done.wait(2)


@pytest.mark.parametrize(
    ("wants", "fetched", "shares"),
    [
        pytest.param([], 0, [], id="no-slot"),
        pytest.param([1, 1, 1], 3, [1, 1, 1], id="one-each"),
        pytest.param([1, 1, 1, 1], 2, [1, 1, 0, 0], id="dry-queue-first-slots-served"),
        pytest.param([1, 1], 0, [0, 0], id="nothing-fetched"),
        pytest.param([20, 20, 1], 25, [20, 5, 0], id="prefetch-in-order"),
        pytest.param([20, 1], 21, [20, 1], id="prefetch-and-idle-slot"),
    ],
)
def test_share_of_a_batched_fetch(wants: list[int], fetched: int, shares: list[int]) -> None:
    assert share(wants, fetched) == shares
    assert sum(shares) == min(fetched, sum(wants))


def _config(delivery: str, *queues: keys.QueueRef) -> WorkerConfig:
    return WorkerConfig(redis_url="redis://127.0.0.1", worker_id="w",
                        schema=keys.KeySchema(prefix="q", queues=queues, dead_letter="q:dead"),
                        handler="m:f", delivery=delivery)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("delivery", "queues", "mode"),
    [
        pytest.param("AtLeastOnce", [keys.QueueRef("q")], "held", id="at-least-once"),
        pytest.param("AtMostOnce", [keys.QueueRef("a"), keys.QueueRef("b")], "brpop",
                     id="lists-brpop"),
        pytest.param("AtMostOnce", [keys.QueueRef("z", "zset")], "bzpopmin", id="zsets"),
        pytest.param("AtMostOnce", [keys.QueueRef("a"), keys.QueueRef("z", "zset")], "unheld",
                     id="mixed-types-script"),
        pytest.param("AtMostOnce", [keys.QueueRef("a", starvation_limit=3), keys.QueueRef("b")],
                     "unheld", id="starvation-limit-script"),
    ],
)
def test_fetch_mode(delivery: str, queues: list[keys.QueueRef], mode: str) -> None:
    assert fetch_mode(_config(delivery, *queues)) == mode
