"""The periodic threads of a worker process (the heartbeat, the promoter, the lease keeper, the
watchdog): one loop and one error policy, so that no Redis error can end one of them.

`Periodic` calls `step()` in a daemon thread of its own until its stop event is set; `step`
returns the seconds to wait before the next call. A Redis error (`store.REDIS_ERRORS`:
connection loss, a timeout, an error reply from a command or from inside a script, a reply of
another shape) does not end the thread: it waits with jittered exponential backoff
(`taskqueue.worker.backoff.Backoff`, started over by the next success) and calls `step` again. The
log says each kind of error once when it starts and then at most once a minute, with how often
it repeated meanwhile (`ErrorLog`, pure), and says when the step works again. Anything else is a
bug: it is logged with its traceback and the thread ends; the runner watches every long-lived
thread (`Worker.threads`) and then drains and exits with status 3, so that the pod restarts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from taskqueue.worker import backoff, resp
from taskqueue.worker.store import REDIS_ERRORS

log = logging.getLogger(__name__)

LOG_EVERY_SECONDS = 60.0
"""While one kind of error repeats, a log line for it at most this often."""


def error_kind(exc: BaseException) -> str:
    """What makes two errors the same for the log: the class, and an error reply's code. Pure."""
    if isinstance(exc, resp.ReplyError):
        return f"{type(exc).__name__}:{exc.code}"
    return type(exc).__name__


class ErrorLog:
    """Which failures of a periodic step are worth a log line. Pure: times are passed in.

    The first failure of a kind is logged, and then one of that kind per `every` seconds; the
    count of those left out goes with the next line. The end of a failure streak is logged when
    some failure of the streak was. (A plain class: a dataclass costs start-up time.)"""

    def __init__(self, *, every: float = LOG_EVERY_SECONDS) -> None:
        self.every = every
        self.streak = 0
        """Failures in a row so far."""
        self.streak_started = 0.0
        self.streak_logged = False
        self._last: dict[str, float] = {}
        self._untold: dict[str, int] = {}

    def failed(self, kind: str, now: float) -> int | None:
        """Count a failure of `kind` at `now`. When it is to be logged: how many failures of
        that kind were not since its last line (0 for the first); else None."""
        if not self.streak:
            self.streak_started = now
        self.streak += 1
        last = self._last.get(kind)
        if last is not None and now - last < self.every:
            self._untold[kind] = self._untold.get(kind, 0) + 1
            return None
        self._last[kind] = now
        self.streak_logged = True
        return self._untold.pop(kind, 0)

    def succeeded(self, now: float) -> tuple[int, float] | None:
        """End the streak; (failures, seconds it lasted) when that is worth a line."""
        told = (self.streak, now - self.streak_started) if self.streak_logged else None
        self.streak = 0
        self.streak_logged = False
        return told


class Periodic:
    """`step()` every time it asks, in a thread named `name`, until `stop` is set.

    `what` names the step in log lines (`heartbeat thread: beat failed (...)`). The first call
    comes after `first_wait` seconds; after a Redis error the next one after the backoff
    (from `backoff.FIRST_SECONDS`, doubling, at most `cap`). `close` runs in the thread when
    it ends, however it ends (the step's connection)."""

    def __init__(self, *, name: str, what: str, step: Callable[[], float],
                 stop: threading.Event, first_wait: float = 0.0,
                 cap: float = backoff.CAP_SECONDS,
                 close: Callable[[], None] | None = None) -> None:
        self.name = name
        self.what = what
        self.step = step
        self.stop = stop
        self.first_wait = first_wait
        self.close = close
        self.schedule = backoff.Backoff(cap=cap)
        self.errors = ErrorLog()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def halt(self, *, timeout: float = 5.0) -> None:
        """Set the stop event and wait up to `timeout` seconds for the thread to end."""
        self.stop.set()
        if self.thread.ident is not None:
            self.thread.join(timeout)

    def _run(self) -> None:
        try:
            wait = self.first_wait
            while not self.stop.wait(wait):
                wait = self._once()
        except BaseException:
            # a bug: the runner sees the thread ended and the worker exits to be restarted
            log.exception("%s thread: unexpected error; the thread ends and the worker exits",
                          self.name)
        finally:
            if self.close is not None:
                self.close()

    def _once(self) -> float:
        """One call of the step; the seconds to wait before the next."""
        try:
            wait = self.step()
        except REDIS_ERRORS as exc:
            delay = self.schedule.failed()
            untold = self.errors.failed(error_kind(exc), time.monotonic())
            if untold is not None:
                more = f" ({untold} more like it since the last line)" if untold else ""
                log.warning("%s thread: %s failed (%s); retrying in %.2fs%s", self.name,
                            self.what, backoff.describe(exc), delay, more)
            return delay
        self.schedule.succeeded()
        told = self.errors.succeeded(time.monotonic())
        if told is not None:
            log.info("%s thread: %s works again after %d failure(s) in %.1fs", self.name,
                     self.what, *told)
        return wait
