"""The promoter's path from a due time to the promotion, counted on a real `taskqueue-worker`
process and a real redis-server: `redis-cli monitor` records every command of the promoter's
connection (the only one that reads the delayed zset's head). Tasks due 0.1 s apart: after each
promotion the promoter reads the next head once and sleeps until its due time, then promotes
at once, without reading the head again; so between two promotions there is exactly one read
(two, with a re-read after each wake-up, is one round trip more on the way to the handler)."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import redis

from taskqueue import client as producer
from tests.helpers.handlers import DONE
from tests.helpers.wait import wait_for
from tests.redis.worker import procs

TASKS = 20
LINE = re.compile(r'^[\d.]+ \[\d+ ([^\]]+)\] "(\w+)"(?: "([^"]*)")?')


def _promoter_calls(log: str, *, delayed: str) -> str:
    """The promoter connection's commands in order: R a read of the head, P a promotion."""
    by_client: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for line in log.splitlines():
        m = LINE.match(line)
        if m and m[1] != "lua":
            by_client[m[1]].append((m[2].upper(), m[3] or ""))
    promoters = [c for c, calls in by_client.items() if ("ZRANGE", delayed) in calls]
    assert len(promoters) == 1, promoters
    return "".join("R" if name == "ZRANGE" else "P"
                   for name, _ in by_client[promoters[0]] if name in ("ZRANGE", "EVALSHA"))


def test_a_sleep_to_the_due_time_promotes_without_reading_the_head_again(
        redis_url: str, redis_sync: redis.Redis, tmp_path: Path) -> None:
    cli = shutil.which("redis-cli")
    assert cli is not None
    monitor_log = tmp_path / "monitor.log"
    with monitor_log.open("wb") as out:
        monitor = subprocess.Popen([cli, "-u", redis_url, "monitor"], stdout=out,
                                   stderr=subprocess.DEVNULL)
    try:
        wait_for("the monitor attached",
                 lambda: redis_sync.ping() and monitor_log.stat().st_size > 0, timeout=30)
        with procs.running(redis_url, "--queue", "pw", "--handler",
                           "tests.helpers.handlers:record", "--worker-id", "pw-0",
                           log_path=tmp_path / "worker.log"):
            wait_for("the worker registered", lambda: redis_sync.zcard("pw:workers") == 1,
                     timeout=30)
            start = time.time() + 1.0
            for i in range(TASKS):
                producer.enqueue_sync(redis_sync, "pw", f"t{i}", at=start + i * 0.1)
            wait_for("every task done", lambda: redis_sync.llen(DONE) == TASKS, timeout=30)
    finally:
        monitor.kill()
        monitor.wait()
    calls = _promoter_calls(monitor_log.read_text(errors="replace"), delayed="pw:delayed")
    promotions = calls[calls.index("P"):calls.rindex("P") + 1]
    assert promotions.count("P") >= TASKS // 2, calls  # most tasks promoted on their own
    assert promotions == "PR" * (promotions.count("P") - 1) + "P", calls
