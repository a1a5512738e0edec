"""A worker's plan, decided once at start from its settings: the fetch mode, whether entries are
held, what runs the tasks and who fetches, and the long-lived threads the runner starts and
watches (`worker/plan.py`). The runner follows it: tests/redis/worker/test_plan_followed.py."""

from __future__ import annotations

import pytest

from taskqueue.wire import keys
from taskqueue.worker.config import WorkerConfig
from taskqueue.worker.plan import plan_for

LIST = keys.QueueRef("a")
LIST_2 = keys.QueueRef("b")
ZSET = keys.QueueRef("z", "zset")
LIMITED = keys.QueueRef("a", starvation_limit=3)
PERIODIC = ("heartbeat", "lifecycle", "promoter")
BLOCKING = (*PERIODIC, "flow")
DISPATCH = ("wakeup", "dispatch")


def settings(delivery: str = "AtLeastOnce", queues: tuple[keys.QueueRef, ...] = (LIST,), *,
             concurrency: int = 1, idempotency: float | None = None,
             tracking: bool = False, task_timeout: float | None = None) -> WorkerConfig:
    return WorkerConfig(redis_url="redis://127.0.0.1", worker_id="w", handler="m:f",
                        schema=keys.KeySchema(prefix="q", queues=queues, dead_letter="q:dead"),
                        delivery=delivery,  # type: ignore[arg-type]
                        concurrency=concurrency, idempotency_window=idempotency,
                        tracking=tracking, task_timeout=task_timeout)


def slots(n: int) -> tuple[str, ...]:
    return tuple(f"slot-{i}" for i in range(n))


@pytest.mark.parametrize(
    ("config", "coroutine", "fetch", "runs", "threads"),
    [
        pytest.param(settings(concurrency=8), False, "held", "threads",
                     PERIODIC + DISPATCH + slots(8), id="at-least-once-thread-slots"),
        pytest.param(settings(), False, "held", "inline", PERIODIC + DISPATCH,
                     id="concurrency-1-runs-inline-on-the-dispatcher"),
        pytest.param(settings(concurrency=8), True, "held", "coroutines",
                     PERIODIC + DISPATCH + ("async-handlers",), id="coroutine-handler"),
        pytest.param(settings(), True, "held", "coroutines",
                     PERIODIC + DISPATCH + ("async-handlers",),
                     id="coroutine-handler-concurrency-1"),
        pytest.param(settings(idempotency=60), False, "held", "threads",
                     (*PERIODIC, "leases", *DISPATCH, *slots(1)),
                     id="idempotent-concurrency-1-has-a-thread"),
        pytest.param(settings(concurrency=4, idempotency=60), True, "held", "threads",
                     (*PERIODIC, "leases", *DISPATCH, *slots(4), "async-handlers"),
                     id="idempotent-coroutine-handler-in-thread-slots"),
        pytest.param(settings("AtMostOnce", (LIST, LIST_2), concurrency=3), False, "brpop",
                     "blocking", BLOCKING + slots(3), id="at-most-once-lists-brpop"),
        pytest.param(settings("AtMostOnce", (ZSET,), concurrency=2), False, "bzpopmin",
                     "blocking", BLOCKING + slots(2), id="at-most-once-zsets-bzpopmin"),
        pytest.param(settings("AtMostOnce", (LIST,), concurrency=2), True, "brpop",
                     "blocking", BLOCKING + slots(2) + ("async-handlers",),
                     id="at-most-once-coroutine-handler-blocking"),
        # the watchdog runs from the start when it watches an event loop: a coroutine handler
        # with a task timeout (a sync one's, or without a timeout, starts with the drain)
        pytest.param(settings(task_timeout=30), True, "held", "coroutines",
                     PERIODIC + DISPATCH + ("async-handlers", "watchdog"),
                     id="coroutine-handler-with-a-task-timeout-watchdog"),
        pytest.param(settings(task_timeout=30), False, "held", "inline", PERIODIC + DISPATCH,
                     id="sync-handler-with-a-task-timeout-no-watchdog"),
        pytest.param(settings("AtMostOnce", (LIST,), task_timeout=30), True, "brpop",
                     "blocking", BLOCKING + slots(1) + ("async-handlers", "watchdog"),
                     id="blocking-coroutine-handler-with-a-task-timeout"),
        pytest.param(settings("AtMostOnce", (LIST, ZSET), concurrency=2), False, "unheld",
                     "threads", PERIODIC + DISPATCH + slots(2), id="at-most-once-mixed-types"),
        pytest.param(settings("AtMostOnce", (LIMITED, LIST_2)), False, "unheld", "inline",
                     PERIODIC + DISPATCH, id="at-most-once-starvation-limit"),
        pytest.param(settings("AtMostOnce", (LIST, ZSET), concurrency=5), True, "unheld",
                     "coroutines", PERIODIC + DISPATCH + ("async-handlers",),
                     id="at-most-once-mixed-coroutines"),
        pytest.param(settings("AtMostOnce", (LIST,), tracking=True), False, "unheld",
                     "inline", PERIODIC + DISPATCH, id="at-most-once-tracking-fetch-lua"),
    ],
)
def test_the_plan_of_each_setting(config: WorkerConfig, coroutine: bool, fetch: str,
                                  runs: str, threads: tuple[str, ...]) -> None:
    plan = plan_for(config, coroutine_handler=coroutine)
    assert (plan.fetch, plan.slots) == (fetch, runs)
    assert plan.held is (config.delivery == "AtLeastOnce")
    assert plan.leases is (config.idempotency_window is not None)
    assert plan.dispatched is (runs != "blocking")
    assert sorted(plan.threads) == sorted(threads)


@pytest.mark.parametrize(
    ("runs", "config", "coroutine", "fetchers"),
    [
        pytest.param("threads", settings(concurrency=2), False,
                     ("dispatch", "the last slot to become ready"), id="threads"),
        pytest.param("inline", settings(), False, ("dispatch",), id="inline"),
        pytest.param("coroutines", settings(), True,
                     ("dispatch", "the event loop when its last coroutines finish"),
                     id="coroutines"),
        pytest.param("blocking", settings("AtMostOnce"), False, ("each slot",),
                     id="blocking"),
    ],
)
def test_who_fetches(runs: str, config: WorkerConfig, coroutine: bool,
                     fetchers: tuple[str, ...]) -> None:
    plan = plan_for(config, coroutine_handler=coroutine)
    assert plan.slots == runs
    assert plan.fetchers == fetchers
    assert " or ".join(fetchers) in plan.describe()
