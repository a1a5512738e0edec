"""Tiny handlers for tests and demos: `taskqueue.worker.builtin:sleep` etc."""

from __future__ import annotations

import time

DEFAULT_SLEEP_SECONDS = 0.1


def noop(payload: str) -> None:
    """Does nothing (benchmarks)."""


def sleep(payload: str) -> None:
    """Sleeps float(payload) seconds, or 0.1 s when the payload is not a number."""
    try:
        seconds = float(payload)
    except ValueError:
        seconds = DEFAULT_SLEEP_SECONDS
    time.sleep(max(0.0, seconds))


def fail(payload: str) -> None:
    """Always fails (retries and dead letters)."""
    raise RuntimeError(f"builtin fail: {payload[:100]}")
