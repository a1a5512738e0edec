"""Test handlers: they record what they ran in Redis (URL in $TASKQUEUE_TEST_REDIS_URL)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import os
import sys
import threading
import time

import redis

from taskqueue.worker.handlers import TaskContext

URL_ENV = "TASKQUEUE_TEST_REDIS_URL"
DONE = "test:done"
CONTEXTS = "test:contexts"
_clients: dict[str, redis.Redis] = {}


def client() -> redis.Redis:
    url = os.environ[URL_ENV]
    if url not in _clients:
        _clients[url] = redis.Redis.from_url(url, decode_responses=True,
                                            encoding_errors="surrogateescape")
    return _clients[url]


def record(payload: str) -> None:
    # bytes: redis-py's hiredis packer encodes str strictly, whatever encoding_errors says
    client().rpush(DONE, payload.encode("utf-8", "surrogateescape"))


def record_with_context(payload: str, ctx: TaskContext) -> None:
    client().rpush(CONTEXTS, json.dumps({"payload": payload, "id": ctx.id, "queue": ctx.queue,
                                         "attempt": ctx.attempt}))
    client().rpush(DONE, payload)


async def record_async(payload: str, ctx: TaskContext) -> None:
    await asyncio.sleep(0.001)
    record_with_context(payload, ctx)


def sleep_then_record(payload: str) -> None:
    """Sleeps float(payload.split(':')[1]) seconds then records the payload."""
    time.sleep(float(payload.split(":")[1]))
    record(payload)


def fail_first(payload: str, ctx: TaskContext) -> None:
    """Fails the first attempt(s) while attempt < int(payload), then records."""
    if ctx.attempt < int(payload):
        raise ValueError(f"attempt {ctx.attempt} fails")
    record_with_context(payload, ctx)


async def fail_first_async(payload: str, ctx: TaskContext) -> None:
    """`fail_first` as a coroutine."""
    fail_first(payload, ctx)


def explode(payload: str) -> None:
    raise RuntimeError("boom " + payload)


def always_fail(payload: str) -> None:
    """Fails every task with the same error (whatever the payload)."""
    raise ValueError("this handler fails every task")


def chaos(payload: str) -> None:
    """A short task for the SIGKILL chaos test: ~2 ms of work, then recorded."""
    time.sleep(0.002)
    client().rpush(DONE, payload)


PIDS = "test:pids"


def record_pid(payload: str) -> None:
    """Record the payload and which process ran it."""
    client().rpush(PIDS, str(os.getpid()))
    record(payload)


def sleep_record_pid(payload: str) -> None:
    """Sleeps float(payload.split(':')[1]) seconds, then records the payload and the process."""
    time.sleep(float(payload.split(":")[1]))
    record_pid(payload)


class CustomBaseError(BaseException):
    """A BaseException that is neither Exception nor SystemExit."""


class UnprintableError(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


_RAISE = {
    "keyboard-interrupt": lambda: KeyboardInterrupt("ctrl-c in a handler"),
    "generator-exit": lambda: GeneratorExit("closed"),
    "custom-base": lambda: CustomBaseError("custom"),
    "cancelled": lambda: asyncio.CancelledError("cancelled"),
    "system-exit": lambda: SystemExit(3),
    "unprintable": lambda: UnprintableError(),
}


def raise_kind(payload: str) -> None:
    """Raises the exception named by the payload (see `_RAISE`); any other payload records."""
    make = _RAISE.get(payload)
    if make is not None:
        raise make()
    record(payload)


def _plain_decorator(fn):  # type: ignore[no-untyped-def]
    """A decorator that hides that `fn` is async (functools.wraps keeps no coroutine flag)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        return fn(*args, **kwargs)
    return wrapper


@_plain_decorator
async def decorated_async(payload: str) -> None:
    """An async handler behind a plain decorator: the worker sees a sync function."""
    await asyncio.sleep(0.01)
    record(payload)


@_plain_decorator
def generator_handler(payload: str):  # type: ignore[no-untyped-def]
    """A generator by mistake, behind a plain decorator (so it passes the start-up check): its
    body never runs unless iterated."""
    record(payload)
    yield


def fail_slowly_or_record(payload: str) -> None:
    """`boom:<seconds>` sleeps then fails; any other payload records."""
    if payload.startswith("boom:"):
        time.sleep(float(payload.split(":")[1]))
        raise RuntimeError("boom")
    record(payload)


def short_work(payload: str) -> None:
    """~10 ms of work, then recorded (outage tests count the records per payload)."""
    time.sleep(0.01)
    record(payload)


RUNS = "test:runs"


def record_run(payload: str) -> None:
    """~10 ms of work, then one field per run in the RUNS hash (run id -> payload), written
    until it succeeds (a lost reply makes it write the same field again), so every field is
    one run of the handler and the handler never fails: a second field means a second run."""
    time.sleep(0.01)
    run_id = os.urandom(8).hex()
    while True:  # the same field until it is written: a Redis outage never fails this run
        try:
            _patient_client().hset(RUNS, run_id, payload)
            return
        except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
            time.sleep(0.05)


_patient: list[redis.Redis] = []


def _patient_client() -> redis.Redis:
    """A client that waits out a paused Redis (redis-py's default read timeout is 5 s): a
    timed-out write that Redis applies later would fail the task and run it again."""
    if not _patient:
        _patient.append(redis.Redis.from_url(os.environ[URL_ENV], decode_responses=True,
                                             socket_timeout=600))
    return _patient[0]


async def async_sleep_then_record(payload: str) -> None:
    """Awaits float(payload.split(':')[1]) seconds, then records the payload."""
    await asyncio.sleep(float(payload.split(":")[1]))
    record(payload)


STARTED = "test:started"


def note_start_sleep_then_record(payload: str) -> None:
    """Records the payload in STARTED, then does as `sleep_then_record`."""
    client().rpush(STARTED, payload)
    sleep_then_record(payload)


async def async_note_start_sleep_then_record(payload: str) -> None:
    """Records the payload in STARTED, then does as `async_sleep_then_record`."""
    client().rpush(STARTED, payload)
    await async_sleep_then_record(payload)


async def async_sleep_or_note_cancel(payload: str) -> None:
    """As `async_sleep_then_record` (noting the start in STARTED first), but a cancellation
    records "cancelled:<payload>"."""
    client().rpush(STARTED, payload)
    try:
        await asyncio.sleep(float(payload.split(":")[1]))
    except asyncio.CancelledError:
        record(f"cancelled:{payload}")
        raise
    record(payload)


async def async_raise_kind(payload: str) -> None:
    """Records "after" and returns; otherwise raises the exception named by the payload (see
    `raise_kind`), "value-error" a ValueError, after yielding to the loop once."""
    await asyncio.sleep(0)
    if payload == "after":
        record(payload)
        return
    if payload == "value-error":
        raise ValueError("bad value")
    raise _RAISE[payload]()


async def block_loop_on_first_attempt(payload: str, ctx: TaskContext) -> None:
    """`block:<seconds>` on its first attempt blocks the event loop (time.sleep inside an
    `async def`, the mistake), noting its start in STARTED first; everything else (and a later
    attempt) yields once and does as `record_with_context`."""
    if payload.startswith("block:") and ctx.attempt == 1:
        client().rpush(STARTED, payload)
        time.sleep(float(payload.split(":")[1]))  # noqa: ASYNC251 (the mistake under test)
    await asyncio.sleep(0)
    record_with_context(payload, ctx)


def _linger() -> None:
    time.sleep(3600)


def start_non_daemon_thread(payload: str) -> None:
    """Starts a thread that is not a daemon and outlives the task, then records."""
    threading.Thread(target=_linger, name=f"lingering-{payload}", daemon=False).start()
    record(payload)


_pool: list[concurrent.futures.ThreadPoolExecutor] = []


def submit_a_long_job(payload: str) -> None:
    """Leaves a job running in an executor of its own (the interpreter waits for it at exit),
    then records."""
    if not _pool:
        _pool.append(concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="handler-pool"))
    _pool[0].submit(_linger)
    record(payload)


LATENESS = "test:lateness"


def record_lateness(payload: str, ctx: TaskContext) -> None:
    """Records how late a scheduled task started: now - its due time (`enqueued_at`)."""
    client().rpush(LATENESS, json.dumps({"payload": payload,
                                         "late": time.time() - (ctx.enqueued_at or 0)}))


async def async_sleep(payload: str) -> None:
    """Awaits float(payload.split(':')[1]) seconds; records nothing (the worker's `completed`
    counter tells what ran), so it never waits for Redis."""
    await asyncio.sleep(float(payload.split(":")[1]))


FORKED = "test:forked"


def fork_or_record_pid(payload: str) -> None:
    """`fork`: forks, and the child returns from the handler like the parent (the mistake); the
    parent waits up to 10 s for the child and records in FORKED how it ended ("exit:<status>",
    or "running:<pid>"). Anything else: `record_pid`."""
    if payload != "fork":
        record_pid(payload)
        return
    pid = os.fork()
    if pid == 0:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            client().rpush(FORKED, f"exit:{os.waitstatus_to_exitcode(status)}")
            return
        time.sleep(0.05)
    client().rpush(FORKED, f"running:{pid}")


async def record_async_bytes(payload: str) -> None:
    """`record` as a coroutine (the payload's exact bytes)."""
    await asyncio.sleep(0)
    record(payload)


def record_then_fail(payload: str) -> None:
    """Records the payload's exact bytes, then fails."""
    record(payload)
    raise RuntimeError("fails after recording")


STARTED = "test:started"
CANCELLED = "test:cancelled"


def until_cancelled(payload: str, ctx: TaskContext) -> None:
    """Notes its start; "quick" records at once, anything else reports progress and waits up
    to a minute for `ctx.cancelled` (then notes the cancel and returns)."""
    client().rpush(STARTED, ctx.id)
    if payload != "quick":
        ctx.progress(0.25, "a quarter")
        if ctx.cancelled.wait(60):
            client().rpush(CANCELLED, ctx.id)
            return
    record(payload)


STEPS = "test:steps"


def progress_steps(payload: str, ctx: TaskContext) -> None:
    """Notes its start; "quick" records at once, anything else reports as its progress each
    `"<fraction> <message>"` the test pushes to STEPS, one at a time, and records the payload
    on "done" (or after a minute)."""
    client().rpush(STARTED, ctx.id)
    deadline = time.monotonic() + 60
    while payload != "quick" and time.monotonic() < deadline:
        got = client().blpop([STEPS], timeout=1)
        if got is None:
            continue
        if got[1] == "done":
            break
        fraction, _, message = got[1].partition(" ")
        ctx.progress(float(fraction), message)
    record(payload)


async def async_until_cancelled(payload: str, ctx: TaskContext) -> None:
    """`until_cancelled` as a coroutine: it sleeps a minute and notes the CancelledError."""
    client().rpush(STARTED, ctx.id)
    if payload != "quick":
        ctx.progress(0.25, "a quarter")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            client().rpush(CANCELLED, ctx.id)
            raise
    record(payload)


ENVELOPES = "test:envelopes"


def record_envelope(payload: str, ctx: TaskContext) -> None:
    """Records what the handler got of its envelope (tests/vectors)."""
    client().rpush(ENVELOPES, json.dumps({"payload": payload, "id": ctx.id,
                                          "attempt": ctx.attempt,
                                          "traceparent": ctx.traceparent}))


MODULES = "test:modules"


def record_modules(payload: str, ctx: TaskContext) -> None:
    """Pushes the taskqueue modules this process has loaded when the task runs (JSON); with the
    payload "progress", after a progress report."""
    if payload == "progress":
        ctx.progress(0.5, "half")
    client().rpush(MODULES, json.dumps(sorted(m for m in sys.modules
                                              if m.startswith("taskqueue"))))
    record(payload)


async def record_modules_async(payload: str, ctx: TaskContext) -> None:
    await asyncio.sleep(0)
    record_modules(payload, ctx)
