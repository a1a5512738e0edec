"""Outage-proof heartbeats (real worker processes, a real redis-server with AOF): after Redis is
paused (SIGSTOP) or shut down and restarted on the same port, no live worker recovers another
(no task runs twice), and a worker whose clock is a minute off recovers nobody.

Outages are measured in heartbeat periods: with `--heartbeat 0.5`, a 2 s outage is 4 periods
(20 s at the default 5 s period) and a 6 s one 12 periods (60 s at 5 s). The `slow` cases run
the 20 s and 60 s outages in real time at the default period.
"""

from __future__ import annotations

import collections
import signal
import time
from pathlib import Path

import pytest
import redis

from taskqueue import client
from tests.fixtures.redis_server import RedisServer
from tests.helpers.handlers import RUNS
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import running, spawn

HANDLERS = "tests.helpers.handlers"
WORKERS = 3


def _outage(server: RedisServer, kind: str, seconds: float) -> None:
    assert server.proc is not None
    if kind == "sigstop":
        server.proc.send_signal(signal.SIGSTOP)
        time.sleep(seconds)
        server.proc.send_signal(signal.SIGCONT)
    else:  # shut down (AOF fsynced on every write) and start again on the same port
        server.stop()
        time.sleep(seconds)
        server.start()


def _runs(r: redis.Redis) -> collections.Counter[str]:
    return collections.Counter(r.hvals(RUNS))


@pytest.mark.parametrize(
    ("kind", "outage", "heartbeat", "total"),
    [
        pytest.param("sigstop", 2.0, 0.5, 1500, id="sigstop-4-periods"),
        pytest.param("restart", 2.0, 0.5, 1500, id="restart-4-periods"),
        pytest.param("sigstop", 6.0, 0.5, 1500, id="sigstop-12-periods"),
        pytest.param("restart", 6.0, 0.5, 1500, id="restart-12-periods"),
        pytest.param("restart", 20.0, 5.0, 2000, id="restart-20s-default-period",
                     marks=[pytest.mark.slow, pytest.mark.timeout(200)]),
        pytest.param("restart", 60.0, 5.0, 2000, id="restart-60s-default-period",
                     marks=[pytest.mark.slow, pytest.mark.timeout(240)]),
    ],
)
@pytest.mark.timeout(120)
def test_outage_causes_no_duplicate_runs(tmp_path: Path, redis_factory: type[RedisServer],
                                         kind: str, outage: float, heartbeat: float,
                                         total: int) -> None:
    server = redis_factory(appendonly=True)  # type: ignore[call-arg]
    r = redis.Redis.from_url(server.url, decode_responses=True)
    client.enqueue_many_sync(r, "q", [str(i) for i in range(total)])
    procs = [spawn(server.url, "--queue", "q", "--handler", f"{HANDLERS}:record_run",
                   "--concurrency", "2", "--prefetch", "4", "--heartbeat", str(heartbeat),
                   "--max-attempts", "50", "--backoff", "0.05", "--worker-id", f"o{n}",
                   log_path=tmp_path / f"worker-{n}.log") for n in range(WORKERS)]
    try:
        # mid-run, past the start-up grace: every worker holds tasks when Redis goes away
        wait_for("r.hlen(RUNS) >= total // 5",
                 lambda: r.hlen(RUNS) >= total // 5, timeout=60, every=0.05)
        time.sleep(3 * heartbeat)
        _outage(server, kind, outage)
        r = redis.Redis.from_url(server.url, decode_responses=True)
        wait_for("len(_runs(r)) >= total",
                 lambda: len(_runs(r)) >= total, timeout=60 + outage, every=0.2)
        wait_for("r.llen('q') == 0 and not r.keys('q:processing:*')",
                 lambda: r.llen("q") == 0 and not r.keys("q:processing:*"), timeout=20)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)
    runs = _runs(r)
    duplicates = sum(n - 1 for n in runs.values())
    recovered = int(r.hget("q:stats", "recovered") or 0)
    print(f"outage {kind} {outage:g}s at heartbeat {heartbeat:g}s: {total} tasks, "
          f"{duplicates} duplicate run(s), {recovered} task(s) recovered from live workers")
    assert set(runs) == {str(i) for i in range(total)}
    assert recovered == 0
    assert duplicates == 0
    assert all(p.returncode == 0 for p in procs)


@pytest.mark.parametrize("skew", [pytest.param(60.0, id="60s-fast"),
                                  pytest.param(-60.0, id="60s-slow")])
def test_worker_clock_skew_recovers_nobody(tmp_path: Path, redis_url: str,
                                           redis_sync: redis.Redis, skew: float) -> None:
    """One worker's clock is a minute off (a sitecustomize shifts time.time in its process);
    both hold a task for 2 s (10 heartbeat periods, a peer judged at each beat after the first
    3): nobody is recovered, each task runs once."""
    fake = tmp_path / "fakeclock"
    fake.mkdir()
    (fake / "sitecustomize.py").write_text(
        "import time\n_real = time.time\n"
        f"time.time = lambda: _real() + {skew!r}\n"
        f"_real_ns = time.time_ns\ntime.time_ns = lambda: _real_ns() + {int(skew * 1e9)}\n")
    redis_sync.lpush("q", "a:2", "b:2")
    args = ("--queue", "q", "--handler", f"{HANDLERS}:sleep_then_record", "--heartbeat", "0.2")
    with running(redis_url, *args, "--worker-id", "normal", log_path=tmp_path / "n.log"), \
            running(redis_url, *args, "--worker-id", "skewed", log_path=tmp_path / "s.log",
                    pythonpath=(str(fake),)):
        wait_for("redis_sync.llen('test:done') == 2",
                 lambda: redis_sync.llen("test:done") == 2, timeout=20)
        time.sleep(0.5)
        assert set(redis_sync.zrange("q:workers", 0, -1)) == {"normal", "skewed"}
    assert sorted(redis_sync.lrange("test:done", 0, -1)) == ["a:2", "b:2"]
    assert redis_sync.hget("q:stats", "recovered") is None
    assert "recovered worker" not in (tmp_path / "n.log").read_text()
    assert "recovered worker" not in (tmp_path / "s.log").read_text()
