"""The error policy of the worker's periodic threads (`worker/periodic.py`), pure: which
failures are logged, and what makes two errors the same kind."""

from __future__ import annotations

import pytest

from taskqueue.worker import periodic, resp


@pytest.mark.parametrize(
    ("failures", "logged"),
    [
        pytest.param([("A", 0.0)], [0], id="the-first-failure-is-logged"),
        pytest.param([("A", 0.0), ("A", 1.0), ("A", 2.0)], [0, None, None],
                     id="a-repeat-within-the-minute-is-not"),
        pytest.param([("A", 0.0), ("A", 1.0), ("A", 2.0), ("A", 61.0)], [0, None, None, 2],
                     id="a-minute-later-with-the-count-left-out"),
        pytest.param([("A", 0.0), ("B", 1.0), ("A", 2.0)], [0, 0, None],
                     id="each-kind-is-logged-once"),
    ],
)
def test_which_failures_are_logged(failures: list[tuple[str, float]],
                                   logged: list[int | None]) -> None:
    errors = periodic.ErrorLog()
    assert [errors.failed(kind, now) for kind, now in failures] == logged


@pytest.mark.parametrize(
    ("events", "told"),
    [
        pytest.param([], None, id="no-streak-nothing-to-say"),
        pytest.param([("A", 10.0)], (1, 2.0), id="a-logged-streak-ends-with-a-line"),
        pytest.param([("A", 10.0), ("A", 11.0)], (2, 2.0), id="counting-every-failure"),
    ],
)
def test_the_end_of_a_failure_streak(events: list[tuple[str, float]],
                                     told: tuple[int, float] | None) -> None:
    errors = periodic.ErrorLog()
    for kind, now in events:
        errors.failed(kind, now)
    assert errors.succeeded(12.0) == told


def test_a_streak_whose_failures_were_all_left_out_ends_quietly() -> None:
    errors = periodic.ErrorLog()
    errors.failed("A", 0.0)
    errors.succeeded(1.0)
    errors.failed("A", 2.0)  # within the minute: not logged
    assert errors.succeeded(3.0) is None


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        pytest.param(resp.ReplyError("ERR Error running script"), "ReplyError:ERR", id="reply"),
        pytest.param(resp.NoPermissionError("NOPERM no"), "NoPermissionError:NOPERM",
                     id="acl"),
        pytest.param(resp.ConnectionLostError("gone"), "ConnectionLostError", id="connection"),
        pytest.param(TimeoutError(), "TimeoutError", id="timeout"),
        pytest.param(resp.UnexpectedReplyError("x"), "UnexpectedReplyError", id="reply-shape"),
    ],
)
def test_error_kinds(error: BaseException, kind: str) -> None:
    assert periodic.error_kind(error) == kind
