"""The one `wait_for` of the tests: poll until something is true, or fail saying what."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], *, timeout: float = 30.0,
             every: float = 0.05) -> T:
    """The first truthy value of `probe()`, polled every `every` seconds; AssertionError naming
    `what` (and the last value seen) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        last: Any = value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} "
                                 f"(last: {last!r})")
        time.sleep(every)
