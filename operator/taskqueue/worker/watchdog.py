"""The watchdog of a worker process: a thread of its own that ends the process when a handler
keeps the worker from working, so that the tasks it holds go to a live worker.

- The event loop of coroutine handlers (`handlers.shared_loop`) must turn. A coroutine that
  blocks it (`time.sleep`, a blocking client, CPU-bound work inside `async def`) stops every
  coroutine of the process: no timeout can fire, the tasks the worker took sit in its
  processing list, and its heartbeat (another thread) keeps it looking alive. Every tick the
  watchdog posts a no-op to the loop (`LoopProbe`); one still waiting after taskTimeoutSeconds +
  `STALL_MARGIN_SECONDS` is a stall. Time the loop spends in the worker's own fetch (a slow
  Redis, `aslot.Bridge.fetching`) and time the whole process did not run (a late tick: SIGSTOP,
  a frozen VM) do not count. Without a task timeout a loop may be held as long as a task runs.
- A drain must end: once the worker stops it has the grace period + `DRAIN_MARGIN_SECONDS`.

On a stall one line names the handler, how long the loop has been stuck and where (the loop
thread's innermost frame); the worker requeues what it holds as a recovery would (attempts + 1,
so that a task which blocks the loop every time is dead-lettered after maxAttempts instead of
stalling worker after worker; `Worker.abandon`), and the process exits with `EXIT_STALLED`. On
a drain overrun one line names the threads still running and the process exits with
`EXIT_STALLED`, leaving what it still holds to recovery (the heartbeat ends with the process).
`Watch` decides (pure); `Watchdog` observes and acts.

`leave` is the last step of a process after its drain: threads the interpreter waits for at
exit (a handler's own that are not daemons, an executor's worker busy with a job) would keep the
process from ending, so they are named and the process exits without waiting for them.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Literal

from taskqueue.worker import handlers
from taskqueue.worker.periodic import Periodic

if TYPE_CHECKING:
    import asyncio

log = logging.getLogger(__name__)

EXIT_STALLED = 4
"""Exit status of a worker whose event loop a handler blocked past the task timeout, or whose
drain overran the grace period: restart it (its tasks were requeued, or recovery requeues
them)."""
TICK_SECONDS = 0.5
"""How often the watchdog looks."""
STALL_MARGIN_SECONDS = 1.0
"""A loop is stalled once held this much longer than the task timeout."""
DRAIN_MARGIN_SECONDS = 10.0
"""What a drain may take beyond the grace period (cancelled coroutines unwinding, the give-back,
leaving the workers set) before the watchdog ends the process."""
LATE_TICKS = 4
"""A tick this many periods late means the process did not run meanwhile: clocks start over."""
ABANDON_WAIT_SECONDS = 5.0
"""How long the requeue after a stall may take before the process exits anyway."""

Verdict = Literal["ok", "stalled", "overrun"]


class Watch:
    """Whether the worker is stuck. Pure: times (monotonic seconds) and what the watchdog saw
    are passed in. (A plain class: a dataclass costs start-up time.)"""

    def __init__(self, *, tick: float = TICK_SECONDS, stall_limit: float | None,
                 drain_limit: float) -> None:
        self.tick = tick
        self.stall_limit = stall_limit
        """Seconds the loop may be held (task timeout + margin); None: no limit."""
        self.drain_limit = drain_limit
        """Seconds a drain may take (grace + margin)."""
        self.last_tick: float | None = None
        self.held_since: float | None = None
        """When the loop was last seen turning, while it has not turned since."""
        self.stopping_since: float | None = None

    def check(self, now: float, *, loop_held: bool, in_fetch: bool, stopping: bool) -> Verdict:
        """One tick at `now`: `loop_held` when the no-op posted at the last tick has not run,
        `in_fetch` when the loop is in the worker's own fetch, `stopping` once the worker
        drains."""
        previous, self.last_tick = self.last_tick, now
        if previous is not None and now - previous > LATE_TICKS * self.tick:
            lost = now - previous - self.tick  # the process did not run: nobody could
            previous += lost
            if self.held_since is not None:
                self.held_since += lost
            if self.stopping_since is not None:
                self.stopping_since += lost
        if stopping and self.stopping_since is None:
            self.stopping_since = now
        if not loop_held or in_fetch:
            self.held_since = None
        elif self.held_since is None:
            self.held_since = now if previous is None else previous
        if (self.stall_limit is not None and self.held_since is not None
                and now - self.held_since > self.stall_limit):
            return "stalled"
        if self.stopping_since is not None and now - self.stopping_since > self.drain_limit:
            return "overrun"
        return "ok"

    def held_for(self, now: float) -> float:
        return 0.0 if self.held_since is None else now - self.held_since


class LoopProbe:
    """Posts a no-op to an event loop and tells whether it has run."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending = False

    def held(self) -> bool:
        """True when the no-op posted last time has not run; else post a new one."""
        if self.pending:
            return True
        self.pending = True
        self.loop.call_soon_threadsafe(self._ran)
        return False

    def _ran(self) -> None:
        self.pending = False


class Watchdog:
    """The watchdog thread of one worker process (a `periodic.Periodic`, so the runner
    watches it too)."""

    def __init__(self, *, handler: str | None, task_timeout: float | None, grace: float,
                 stopping: threading.Event, abandon: Callable[[str], None],
                 in_fetch: Callable[[], bool] = lambda: False) -> None:
        self.handler = handler or "?"
        self.task_timeout = task_timeout
        self.stopping = stopping
        self.abandon = abandon
        """Requeue what the worker holds (runs in a thread of its own, bounded)."""
        self.in_fetch = in_fetch
        self.watch = Watch(
            stall_limit=None if task_timeout is None else task_timeout + STALL_MARGIN_SECONDS,
            drain_limit=grace + DRAIN_MARGIN_SECONDS)
        self.probe: LoopProbe | None = None
        self.loop = Periodic(name="watchdog", what="watch", step=self._step,
                             stop=threading.Event(), first_wait=TICK_SECONDS)

    def _step(self) -> float:
        now = time.monotonic()
        verdict = self.watch.check(now, loop_held=self._loop_held(), in_fetch=self.in_fetch(),
                                   stopping=self.stopping.is_set())
        if verdict == "stalled":
            self._stalled(self.watch.held_for(now))
        elif verdict == "overrun":
            self._overrun()
        return TICK_SECONDS

    def _loop_held(self) -> bool:
        if self.probe is None:
            started = handlers.started_loop()
            if started is None:
                return False
            self.probe = LoopProbe(started[0])
        return self.probe.held()

    def _stalled(self, held: float) -> None:
        started = handlers.started_loop()
        at = where(started[1]) if started is not None else "?"
        log.critical(
            "handler %s has held the event loop for %.1fs, past taskTimeoutSeconds %g: it is "
            "stuck at %s. A coroutine handler must not block (time.sleep, a blocking client, "
            "CPU-bound work): await instead, or run the blocking call in asyncio.to_thread. "
            "Requeueing this worker's tasks (attempts + 1) and exiting with status %d",
            self.handler, held, self.task_timeout or 0, at, EXIT_STALLED)
        requeue = threading.Thread(target=self.abandon, args=(f"handler {self.handler} "
                                   "blocked the event loop",), name="abandon", daemon=True)
        requeue.start()
        requeue.join(ABANDON_WAIT_SECONDS)
        self._exit()

    def _overrun(self) -> None:
        others = [t for t in threading.enumerate()
                  if t.is_alive() and t is not threading.current_thread()]
        log.critical("the drain did not end within the grace period + %gs; still running: %s. "
                     "Exiting with status %d (recovery requeues what is still held)",
                     DRAIN_MARGIN_SECONDS, "; ".join(f"{t.name} at {where(t)}" for t in others),
                     EXIT_STALLED)
        self._exit()

    def _exit(self) -> None:
        flush_logs()
        os._exit(EXIT_STALLED)


def where(thread: threading.Thread) -> str:
    """`file:line in function` of the innermost frame of `thread` outside the threading
    module ('?' when it is not running)."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None:
        return "?"
    innermost = frame
    while frame is not None and frame.f_code.co_filename == threading.__file__:
        frame = frame.f_back
    return describe_frame(frame or innermost)


def describe_frame(frame: FrameType) -> str:
    return f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"


def pool_worker(frame: FrameType | None) -> Literal["idle", "busy"] | None:
    """Whether a thread whose innermost frame is `frame` is a `concurrent.futures` worker,
    waiting for work or running a job; None when it is not one."""
    pool = sys.modules.get("concurrent.futures.thread")  # not imported: no such worker
    at = frame
    while pool is not None and at is not None:
        if at.f_code.co_name == "_worker" and at.f_code.co_filename == pool.__file__:
            return "idle" if at is frame else "busy"
        at = at.f_back
    return None


def leftover_threads() -> list[threading.Thread]:
    """Threads that would keep the interpreter from ending: the ones alive that are not
    daemons (but for idle executor workers, which end at exit) and the executor workers
    running a job (the interpreter waits for their executor at exit, daemons or not)."""
    frames = sys._current_frames()
    stuck = []
    for t in threading.enumerate():
        if t is threading.main_thread() or not t.is_alive():
            continue
        pool = pool_worker(frames.get(t.ident or -1))
        if pool == "busy" or (pool is None and not t.daemon):
            stuck.append(t)
    return stuck


def leave(status: int) -> int:
    """After the drain: `status`, or exit at once with it when threads that are not daemons
    are still running (named in the log)."""
    stuck = leftover_threads()
    if not stuck:
        return status
    log.warning("thread(s) the interpreter would wait for are still running after the drain "
                "(started by the handler?): %s; exiting without waiting for them",
                "; ".join(f"{t.name!r} at {where(t)}" for t in stuck))
    flush_logs()
    os._exit(status)


def flush_logs() -> None:
    """Flush every log handler and the standard streams (before `os._exit`)."""
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
