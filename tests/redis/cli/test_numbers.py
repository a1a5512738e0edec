"""Every numeric option of the CLI refuses nan, inf and values out of its range before anything
is sent: exit 2 and one line that names the option and says the range."""

from __future__ import annotations

import pytest
import redis

from taskqueue.cli.main import main

HUGE = "9" * 400  # a float of it is inf

BAD = [
    pytest.param(["enqueue", "jobs", "--in", HUGE, "p"], "--in", "a duration from 0s to 3650d",
                 id="in-overflows"),
    pytest.param(["enqueue", "jobs", "--in", "3651d", "p"], "--in", "from 0s to 3650d",
                 id="in-over-ten-years"),
    pytest.param(["enqueue", "jobs", "--in", "nan", "p"], "--in", "'nan' is not a duration",
                 id="in-nan"),
    pytest.param(["enqueue", "jobs", "--at", "nan", "p"], "--at",
                 "'nan' is out of range; give unix seconds (or a datetime) from 0 to",
                 id="at-nan"),
    pytest.param(["enqueue", "jobs", "--at", "inf", "p"], "--at", "'inf' is out of range",
                 id="at-inf"),
    pytest.param(["enqueue", "jobs", "--at=-inf", "p"], "--at", "'-inf' is out of range",
                 id="at-minus-inf"),
    pytest.param(["enqueue", "jobs", "--at", "9999-01-01T00:00:00Z", "p"], "--at",
                 "(10 years from now)", id="at-too-far"),
    pytest.param(["enqueue", "jobs", "--unique-for", "0", "p"], "--unique-for",
                 "'0' is out of range; give a duration from 0.001s to 3650d", id="unique-zero"),
    pytest.param(["enqueue", "jobs", "--unique-for", HUGE + "d", "p"], "--unique-for",
                 "is out of range", id="unique-overflows"),
    pytest.param(["enqueue", "jobs", "--priority", "nan", "p"], "--priority",
                 "'nan' is out of range; give a finite number", id="priority-nan"),
    pytest.param(["enqueue", "jobs", "--priority", "inf", "p"], "--priority",
                 "'inf' is out of range", id="priority-inf"),
    pytest.param(["enqueue", "jobs", "--priority", "x", "p"], "--priority",
                 "'x' is not a number", id="priority-text"),
    pytest.param(["stats", "--queue", "jobs", "--interval", "nan"], "--interval",
                 "'nan' is out of range; give seconds from 0 to 3600", id="interval-nan"),
    pytest.param(["stats", "--queue", "jobs", "--watch", "--interval", "inf"], "--interval",
                 "'inf' is out of range", id="interval-inf"),
    pytest.param(["stats", "--queue", "jobs", "--interval=-1"], "--interval",
                 "'-1' is out of range", id="interval-negative"),
    pytest.param(["stats", "--queue", "jobs", "--watch", "--iterations", "0"], "--iterations",
                 "'0' is out of range; give a whole number >= 1", id="iterations-zero"),
    pytest.param(["stats", "--queue", "jobs", "--watch", "--iterations", "1.5"],
                 "--iterations", "'1.5' is not a whole number", id="iterations-fraction"),
    pytest.param(["dlq", "requeue", "--queue", "jobs", "--all", "--priority", "nan"],
                 "--priority", "'nan' is out of range; give a finite number",
                 id="requeue-priority-nan"),
]


@pytest.mark.parametrize(("argv", "option", "says"), BAD)
def test_a_number_out_of_range_is_one_line_naming_the_option(
        redis_url: str, redis_sync: redis.Redis, capsys: pytest.CaptureFixture[str],
        argv: list[str], option: str, says: str) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--redis-url", redis_url])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"taskqueue {argv[0]}") and f": argument {option}: " in err, err
    assert says in err, err
    assert redis_sync.dbsize() == 0
