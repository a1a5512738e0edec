"""The installed `taskqueue` console script, run as a subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
import redis

from tests.unit.cli.test_console_script import _taskqueue


def test_enqueue_then_stats_json(redis_url: str) -> None:
    enq = subprocess.run([*_taskqueue(), "enqueue", "--redis-url", redis_url, "jobs", "a", "b"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert enq.returncode == 0, enq.stderr
    st = subprocess.run([*_taskqueue(), "stats", "--redis-url", redis_url, "--queue", "jobs",
                         "--json", "--interval", "0"],
                        capture_output=True, text=True, timeout=60, check=False)
    assert st.returncode == 0, st.stderr
    assert json.loads(st.stdout)["backlog"] == 2


@pytest.mark.timeout(60)
def test_watch_exits_0_on_ctrl_c(redis_url: str, redis_sync: redis.Redis) -> None:
    redis_sync.lpush("jobs", "a")
    proc = subprocess.Popen([*_taskqueue(), "stats", "--redis-url", redis_url, "--queue", "jobs",
                             "--watch", "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # the first refresh is on screen
    assert "TaskQueue jobs" in first
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err
