"""`taskqueue stats` without a server: the throughput of two samples, and `--watch` of an
unreachable Redis fails at once."""

from __future__ import annotations

import pytest

from taskqueue.cli import stats
from tests.helpers.cli import Run


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        pytest.param([], (None, 0.0), id="none"),
        pytest.param([stats.Sample(10, 5)], (None, 0.0), id="one"),
        pytest.param([stats.Sample(10, 5), stats.Sample(20, 25)], (2.0, 10.0), id="rise"),
        pytest.param([stats.Sample(10, 25), stats.Sample(20, 5)], (0.0, 10.0), id="reset"),
    ],
)
def test_throughput_of_samples(
    samples: list[stats.Sample], expected: tuple[float | None, float]
) -> None:
    assert stats.throughput(samples) == expected


def test_watch_of_an_unreachable_redis_still_fails_at_once(cli: Run) -> None:
    result = cli("stats", "--redis-url", "redis://127.0.0.1:1/0", "--queue", "jobs",
                 "--watch", "--iterations", "3")
    assert result.code == 4
    assert result.err.startswith("taskqueue: cannot reach Redis at redis://127.0.0.1:1/0")
