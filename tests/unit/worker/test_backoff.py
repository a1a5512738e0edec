"""The backoff helper (pure): retry delays, the reconnect schedule, retry() and describe()."""

from __future__ import annotations

import logging
import random

import pytest

from taskqueue.worker import backoff


@pytest.mark.parametrize(
    ("failures", "first", "cap", "low", "high"),
    [
        pytest.param(1, 0.05, 5.0, 0.025, 0.05, id="first"),
        pytest.param(3, 0.05, 5.0, 0.1, 0.2, id="doubles"),
        pytest.param(20, 0.05, 5.0, 2.5, 5.0, id="capped"),
        pytest.param(5000, 0.05, 5.0, 2.5, 5.0, id="no-overflow"),
        pytest.param(4, 1.0, 0.5, 0.25, 0.5, id="cap-below-first"),
    ],
)
def test_backoff_schedule(failures: int, first: float, cap: float, low: float,
                          high: float) -> None:
    schedule = backoff.Backoff(first=first, cap=cap, rng=random.Random(failures))
    delays = [schedule.failed() for _ in range(failures)]
    assert low <= delays[-1] <= high
    assert schedule.failures == failures
    schedule.succeeded()
    assert schedule.failures == 0
    assert min(first, cap) / 2 <= schedule.failed() <= min(first, cap)


class Flaky:
    """Fails `failures` times with `error`, then returns "ok"."""

    def __init__(self, failures: int, error: type[BaseException]) -> None:
        self.left = failures
        self.error = error
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise self.error("down")
        return "ok"


@pytest.mark.parametrize(
    ("failures", "attempts", "stop_after", "result", "calls", "waits"),
    [
        pytest.param(0, None, None, "ok", 1, 0, id="first-try"),
        pytest.param(3, None, None, "ok", 4, 3, id="until-it-works"),
        pytest.param(5, 3, None, backoff.GaveUpError, 3, 2, id="attempts-run-out"),
        pytest.param(5, None, 2, backoff.GaveUpError, 2, 2, id="stopped-while-waiting"),
    ],
)
def test_retry(failures: int, attempts: int | None, stop_after: int | None,
               result: object, calls: int, waits: int) -> None:
    fn = Flaky(failures, ConnectionError)
    waited: list[float] = []

    def wait(seconds: float) -> bool:
        waited.append(seconds)
        return stop_after is not None and len(waited) >= stop_after

    run = lambda: backoff.retry(fn, what="test call", log=logging.getLogger("t"),  # noqa: E731
                                wait=wait, retry_on=(ConnectionError,), attempts=attempts)
    if result is backoff.GaveUpError:
        with pytest.raises(backoff.GaveUpError) as info:
            run()
        assert isinstance(info.value.__cause__, ConnectionError)
    else:
        assert run() == result
    assert fn.calls == calls
    assert len(waited) == waits


def test_retry_lets_other_errors_through() -> None:
    with pytest.raises(KeyError):
        backoff.retry(Flaky(1, KeyError), what="x", log=logging.getLogger("t"),
                      wait=lambda _: False, retry_on=(ConnectionError,))


class BadStrError(Exception):
    def __str__(self) -> str:
        raise ValueError("no")


class BaseBadStrError(BaseException):
    def __str__(self) -> str:
        raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("exc", "text"),
    [
        pytest.param(RuntimeError("boom"), "RuntimeError: boom", id="plain"),
        pytest.param(KeyError(), "KeyError", id="empty-message"),
        pytest.param(ValueError("two\nlines"), "ValueError: two lines", id="one-line"),
        pytest.param(BadStrError(), "BadStrError: <str() raised ValueError>", id="str-raises"),
        pytest.param(BaseBadStrError(), "BaseBadStrError: <str() raised KeyboardInterrupt>",
                     id="str-raises-base-exception"),
        pytest.param(RuntimeError("x" * 5000), "RuntimeError: " + "x" * 1986, id="bounded"),
    ],
)
def test_describe(exc: BaseException, text: str) -> None:
    assert backoff.describe(exc) == text
