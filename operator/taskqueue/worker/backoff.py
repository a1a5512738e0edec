"""Backoff: how long to wait before trying again. Pure (no sleeping, no I/O).

One owner for every retry delay of the project:
- `delay()` is the retry delay of a failed task (exponential, capped, equal jitter).
- `Backoff` is the reconnect/retry schedule of a long-lived loop (worker threads, listeners):
  `failed()` returns the next delay and counts the failure, `succeeded()` starts over.
- `retry()` runs one call until it succeeds, sleeping through `Backoff` between failures, and
  raises `GaveUpError` when the caller's wait reports a stop or the attempts run out.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

_RNG = random.Random()

FIRST_SECONDS = 0.05
"""First reconnect delay of a long-lived loop."""
CAP_SECONDS = 5.0
"""Longest reconnect delay of a long-lived loop."""


def delay(*, attempts: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Seconds before the retry that follows attempt number `attempts` (1 = the first failure).

    base * 2**(attempts-1), capped at `cap`, then a uniformly random value in [d/2, d].
    """
    d = min(cap, math.ldexp(base, min(1000, max(0, attempts - 1))))
    return d / 2 + (rng or _RNG).uniform(0, d / 2)


@dataclass
class Backoff:
    """The delays of a loop that retries after errors: `first`, doubled per failure in a row,
    capped at `cap`, with equal jitter (so a fleet that lost Redis together does not return in
    one burst)."""

    first: float = FIRST_SECONDS
    cap: float = CAP_SECONDS
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0
    """Failures in a row so far."""

    def failed(self) -> float:
        """Count one more failure; the seconds to wait before the next try."""
        self.failures += 1
        return delay(attempts=self.failures, base=self.first, cap=self.cap, rng=self.rng)

    def succeeded(self) -> None:
        self.failures = 0


class GaveUpError(Exception):
    """`retry()` stopped before the call succeeded: the wait reported a stop, or the attempts
    ran out. `__cause__` is the last error."""


def retry(fn: Callable[[], T], *, what: str, log: logging.Logger,
          wait: Callable[[float], bool], retry_on: tuple[type[BaseException], ...],
          backoff: Backoff | None = None, attempts: int | None = None,
          fatal: tuple[type[BaseException], ...] = ()) -> T:
    """`fn()` until it returns, retrying on `retry_on` with a log line naming `what` and the
    error. `wait(seconds)` sleeps and returns True when the caller is stopping (`Event.wait`).
    Raises `GaveUpError` (from the last error) on a stop or after `attempts` failed calls; an
    error in `fatal` (one no retry can cure, e.g. an ACL refusal) is raised at once."""
    schedule = backoff or Backoff()
    tries = 0
    while True:
        try:
            return fn()
        except fatal:
            raise
        except retry_on as exc:
            tries += 1
            seconds = schedule.failed()
            if attempts is not None and tries >= attempts:
                raise GaveUpError(f"{what}: gave up after {tries} attempt(s)") from exc
            log.warning("%s failed (%s); retrying in %.2fs", what, describe(exc), seconds)
            if wait(seconds):
                raise GaveUpError(f"{what}: stopped while retrying") from exc


def describe(exc: BaseException) -> str:
    """`Type: message` of any exception, even one whose `__str__` raises. One line, bounded."""
    name = type(exc).__name__
    try:
        text = str(exc)
    except BaseException as inner:
        text = f"<str() raised {type(inner).__name__}>"
    text = " ".join(text.split())
    return f"{name}: {text}"[:2000] if text else name
