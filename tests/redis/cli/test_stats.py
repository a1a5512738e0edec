"""`taskqueue stats`: the numbers match what is in Redis; --watch refreshes."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from taskqueue.cli import stats
from taskqueue.wire import keys
from tests.fixtures.redis_server import RedisServer
from tests.helpers.cli import Run


def _fill(r: redis.Redis, *, now: float) -> None:
    """vip: 3 tasks (oldest enqueued 100 s ago), normal: 2 raw; 2 in flight, 1 delayed, 2 dead."""
    for age in (100, 50, 10):
        r.lpush("vip", keys.wrap(f"v{age}", enqueued_at=now - age))
    r.lpush("normal", "raw1", "raw2")
    r.zadd("vip:workers", {"w-alive": (now + 30) * 1000, "w-dead": (now - 30) * 1000})
    for i in range(2):
        r.lpush("vip:processing:w-alive", keys.Entry("vip", "", keys.wrap(f"p{i}")).encode())
    r.zadd("vip:delayed", {keys.Entry("normal", "", "d").encode(): (now + 60) * 1000})
    r.lpush("vip:dead", '{"queue":"vip"}', '{"queue":"normal"}')
    r.hset("vip:stats", mapping={"completed": 7, "failed": 3})
    # the workers measured 100 waits of vip: 10 over 2 s, none over 3 s (p95 2.5 s)
    counted, *over = keys.wait_fields("vip")
    r.hset("vip:stats", mapping={counted: 100, over[0]: 40, over[1]: 30, over[2]: 10})


def test_json_numbers_match_what_was_pushed(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _fill(redis_sync, now=time.time())
    result = cli("stats", "-f", manifest_file(), "--json", "--interval", "0")
    assert result.code == 0, result.err
    snap = result.json()
    assert snap["taskqueue"] == "media/thumbs"
    assert [(q["key"], q["type"], q["backlog"]) for q in snap["queues"]] == [
        ("vip", "list", 3), ("normal", "list", 2)
    ]
    assert snap["queues"][0]["oldest_task_age_seconds"] == pytest.approx(100, abs=2)
    assert snap["queues"][1]["oldest_task_age_seconds"] is None  # raw payloads carry no time
    assert snap["queues"][0]["wait_p95_seconds"] == 2.5
    assert snap["queues"][1]["wait_p95_seconds"] is None  # no wait measured
    assert (snap["backlog"], snap["in_flight"], snap["delayed"], snap["dead_letter"]) == (
        5, 2, 1, 2
    )
    assert snap["workers"] == {"alive": 1, "registered": 2, "busy": 1}
    assert (snap["completed_total"], snap["failed_total"]) == (7, 3)
    assert snap["throughput_per_second"] is None


def test_throughput_is_the_completed_rise_between_two_samples(
    cli: Run, redis_url: str
) -> None:
    other = redis.Redis.from_url(redis_url)
    timer = threading.Timer(0.2, other.hincrby, ("jobs:stats", "completed", 30))
    timer.start()
    try:
        result = cli("stats", "--redis-url", redis_url, "--queue", "jobs", "--json",
                     "--interval", "1")
    finally:
        timer.join()
        other.close()
    snap = result.json()
    assert snap["completed_total"] == 30
    assert snap["throughput_window_seconds"] == pytest.approx(1.0, abs=0.2)
    assert snap["throughput_per_second"] == pytest.approx(30, rel=0.2)


def test_text_view_shows_every_queue_and_the_totals(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _fill(redis_sync, now=time.time())
    out = cli("stats", "-f", manifest_file(), "--interval", "0").out
    assert "TaskQueue media/thumbs" in out
    assert [line.split()[:3] for line in out.splitlines()[2:5]] == [
        ["QUEUE", "TYPE", "BACKLOG"], ["vip", "list", "3"], ["normal", "list", "2"]
    ]
    assert "P95 WAIT" in out.splitlines()[2]
    assert out.splitlines()[3].split()[-2:] == ["2.5s", "-"]  # vip's p95 wait, no flow limit
    assert out.splitlines()[4].split()[-2:] == ["-", "-"]
    assert "dead letters     2" in out
    assert "workers          1 alive, 1 busy, 2 registered" in out
    assert "oldest task      1m4" in out  # 100 s -> 1m40s (1m41s on a slow machine)


def test_the_dead_letters_dropped_by_the_cap_are_shown(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis
) -> None:
    _fill(redis_sync, now=time.time())
    redis_sync.hset("vip:stats", keys.DEAD_TRIMMED_FIELD, 250)
    snap = cli("stats", "-f", manifest_file(), "--json", "--interval", "0").json()
    assert (snap["dead_letter"], snap["dead_letter_trimmed_total"]) == (2, 250)
    out = cli("stats", "-f", manifest_file(), "--interval", "0").out
    assert "dead letters     2 (250 older dropped by retry.deadLetterMaxLength)" in out


def test_watch_redraws_until_the_iterations_are_done(
    cli: Run, redis_url: str, redis_sync: redis.Redis
) -> None:
    redis_sync.lpush("jobs", "a")
    result = cli("stats", "--redis-url", redis_url, "--queue", "jobs", "--watch",
                 "--interval", "0.1", "--iterations", "3")
    assert result.code == 0
    assert result.out.count(stats.CLEAR) == 3
    assert "Ctrl-C to quit" in result.out


def test_watch_json_prints_one_document_per_refresh(
    cli: Run, redis_url: str
) -> None:
    result = cli("stats", "--redis-url", redis_url, "--queue", "jobs", "--watch", "--json",
                 "--interval", "0.1", "--iterations", "2")
    docs = [json.loads(line) for line in result.out.splitlines()]
    assert [d["backlog"] for d in docs] == [0, 0]
    assert docs[1]["throughput_per_second"] == 0


@pytest.mark.parametrize(
    ("key", "setup", "message"),
    [
        pytest.param("normal", lambda r: r.set("normal", "x"),
                     "key 'normal' holds a string, not a list", id="queue"),
        pytest.param("vip:workers", lambda r: r.lpush("vip:workers", "w"),
                     "key 'vip:workers' holds a list, not a zset", id="workers"),
        pytest.param("vip:stats", lambda r: r.set("vip:stats", "1"),
                     "key 'vip:stats' holds a string, not a hash", id="stats"),
        pytest.param("vip:processing:w1", lambda r: (
            r.zadd("vip:workers", {"w1": 1}), r.set("vip:processing:w1", "x")),
            "key 'vip:processing:w1' holds a string, not a list", id="processing"),
    ],
)
def test_a_wrong_type_key_is_named_not_a_lua_error(
    cli: Run, manifest_file: Callable[..., str], redis_sync: redis.Redis, key: str,
    setup: Callable[[redis.Redis], object], message: str,
) -> None:
    setup(redis_sync)
    result = cli("stats", "-f", manifest_file(), "--interval", "0")
    assert result.code == 5
    assert result.err == f"taskqueue: WRONGTYPE: {message}; check the key name\n"
    assert "script" not in result.err and "@user_script" not in result.err


def _refresh(proc: subprocess.Popen[str]) -> str:
    """The next line `stats --watch --json` prints (it must not end before)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"the watch ended: {proc.wait(timeout=30)}, {proc.communicate()[1]}"
    return line


def test_watch_rides_out_a_redis_restart(tmp_path: Path) -> None:
    """Redis is killed while --watch runs, then started again (empty): the refreshes show the
    error while it is down (each sample is sent once) and fresh numbers once it is back."""
    server = RedisServer(data_dir=tmp_path / "redis")
    server.start()
    try:
        redis.Redis.from_url(server.url).lpush("jobs", "a")
        proc = subprocess.Popen(
            [sys.executable, "-m", "taskqueue.cli.main", "stats", "--redis-url", server.url,
             "--queue", "jobs", "--watch", "--json", "--interval", "0.2",
             "--iterations", "1000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lines = [_refresh(proc)]  # it has read Redis once (startup is slow under load)
        server.stop(kill=True)
        while "error" not in lines[-1]:
            lines.append(_refresh(proc))
        server.start()
        while "error" in lines[-1]:
            lines.append(_refresh(proc))
        proc.send_signal(signal.SIGINT)  # Ctrl-C: the watch ends with exit code 0
        out, err = proc.communicate(timeout=60)
    finally:
        server.stop()
    assert (proc.returncode, err) == (0, "")
    docs = [json.loads(line) for line in [*lines, *out.splitlines()] if line.strip()]
    kinds = "".join("e" if "error" in d else "s" for d in docs)
    assert re.fullmatch(r"s+e+s+", kinds), kinds  # read, errors while down, read again
    assert "Connection" in next(d["error"] for d in docs if "error" in d)
    assert docs[-1]["backlog"] == 0 and docs[0]["backlog"] == 1
