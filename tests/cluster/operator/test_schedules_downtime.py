"""Ten minutes of operator downtime with `catchUpSeconds: 300`, full length, on the real
kube-apiserver with a real `taskqueue-operator` process and a real redis-server: an every-second
schedule fires, the operator is SIGKILLed at a slot and stays down 600 s of real time, then
starts again. Every slot of the last 300 s before its first counting poll is fired exactly once,
every older slot of the gap is counted as missed (the Redis counter, the status) and not fired,
no slot is fired twice, and firing goes on.

The task ids in the delayed zset cannot show a double (a slot's element is the same each time it
would be fired, and a zset holds it once), so `redis-cli monitor` records every command Redis
runs, fire.lua's own included: each ZADD of a slot's task is one firing, and fire.lua's arguments
carry the operator's clock at its counting poll (`init`), the instant the catch-up window is
measured from. While the operator is down nothing sends a command and the test only sleeps.
Slow: one test at a time in `scripts/test`'s serial part, about 11 minutes."""

from __future__ import annotations

import calendar
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis

from taskqueue.wire import keys
from taskqueue_devcluster import ControlPlane
from tests.fixtures.processes import Spawn
from tests.fixtures.redis_server import RedisServer
from tests.helpers.kube import apply, get, taskqueue
from tests.helpers.wait import wait_for

CATCH_UP = 300
DOWN = 600
QUEUE = "down:jobs"
SLOT_ID = re.compile(r"tick:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)")
# one schedule's header in fire.lua's arguments: name, seen, init, through, missed
HEADER = re.compile(r'"tick" "(\d*)" "(\d+)" "(\d+)" "(\d+)"')

pytestmark = [pytest.mark.slow, pytest.mark.timeout(DOWN + 300)]


def _operator(spawn: Spawn, cp: ControlPlane, namespace: str) -> subprocess.Popen[bytes]:
    exe = shutil.which("taskqueue-operator")
    assert exe is not None
    return spawn([exe, "--namespace", namespace, "--no-leader-election", "--health-port", "0",
                  "--metrics-port", "0", "--kubeconfig", str(cp.kubeconfig)])


def _second(slot_id: str) -> int:
    return calendar.timegm(time.strptime(slot_id, "%Y-%m-%dT%H:%M:%SZ"))


def _complete(log: str) -> str:
    """The monitor's log without a last line it is still writing (read mid-line, a ZADD's
    arguments are cut short)."""
    return log[:log.rfind("\n") + 1]


def _firings(log: str) -> Counter[int]:
    """Slot (epoch second) -> how many times fire.lua ZADDed its task to the delayed zset."""
    fired: Counter[int] = Counter()
    for line in _complete(log).splitlines():
        if '[0 lua] "ZADD"' in line and f'"{QUEUE}:delayed"' in line:
            ids = set(SLOT_ID.findall(line))
            assert len(ids) == 1, line
            fired[_second(ids.pop())] += 1
    return fired


def _counting_calls(log: str) -> list[tuple[int, int, int]]:
    """(seen, init, missed) of each fire.lua call that counted missed slots."""
    headers = [tuple(int(v or 0) for v in m.groups())
               for m in HEADER.finditer(_complete(log))]
    return [(seen, init, missed) for seen, init, _, missed in headers if missed]


def _counting_call(log: str) -> tuple[int, int, int]:
    """(seen, init, missed) of the one fire.lua call that counted missed slots."""
    counting = _counting_calls(log)
    assert len(counting) == 1, counting
    return counting[0]


def _missed(cp: ControlPlane, namespace: str) -> int:
    body = get(cp, "tq", "down", "-n", namespace) or {}
    return int(body.get("status", {}).get("schedules", {}).get("tick", {}).get("missed", 0))


def test_ten_minutes_down_with_catch_up_300_fires_the_last_300_s_once_and_counts_the_rest(
        control_plane: ControlPlane, namespace: str, crd: None, spawn_process: Spawn,
        redis_factory: Any, tmp_path: Path) -> None:
    server: RedisServer = redis_factory()
    r = redis.Redis.from_url(server.url, decode_responses=True)
    cli = shutil.which("redis-cli")
    assert cli is not None
    monitor_log = tmp_path / "monitor.log"
    with monitor_log.open("wb") as out:
        monitor = subprocess.Popen([cli, "-u", server.url, "monitor"], stdout=out,
                                   stderr=subprocess.DEVNULL)
    try:
        wait_for("the monitor attached", lambda: r.ping() and monitor_log.stat().st_size > 0,
                 timeout=30)
        apply(control_plane, namespace, taskqueue(
            "down", server.url,
            scaling={"maxReplicas": 1, "pollIntervalSeconds": 1, "podStartupSeconds": 0},
            schedules=[{"name": "tick", "cron": "* * * * * *", "queue": QUEUE,
                        "payload": "hello", "catchUpSeconds": CATCH_UP}]))
        first = _operator(spawn_process, control_plane, namespace)
        wait_for("slots fired", lambda: r.zcard(f"{QUEUE}:delayed") >= 5, timeout=120)
        time.sleep(1 - time.time() % 1)  # SIGKILL at a slot boundary
        first.send_signal(signal.SIGKILL)
        first.wait()
        killed = time.time()
        time.sleep(DOWN)
        second = _operator(spawn_process, control_plane, namespace)
        wait_for("the missed slots counted", lambda: int(
            r.hget(f"{QUEUE}:schedules", "missed:tick") or 0) > 0, timeout=120)
        # the monitor's stream can trail the counter Redis already holds
        wait_for("the counting call in the monitor's log", lambda: _counting_calls(
            monitor_log.read_text(errors="replace")), timeout=30)
        _, init, _ = _counting_call(monitor_log.read_text(errors="replace"))
        wait_for("firing after the gap", lambda: max(_firings(monitor_log.read_text(
            errors="replace"))) >= init // 1000 + 3, timeout=60)
        counted = int(r.hget(f"{QUEUE}:schedules", "missed:tick") or 0)
        wait_for("the missed slots in the status",
                 lambda: _missed(control_plane, namespace) == counted, timeout=60)
        second.send_signal(signal.SIGKILL)
        second.wait()
    finally:
        monitor.kill()
        monitor.wait()

    log = monitor_log.read_text(errors="replace")
    fired = _firings(log)
    seen, init, missed_arg = _counting_call(log)
    assert init / 1000 - killed >= DOWN  # the operator's own clock: down 600 s at least
    assert {s: n for s, n in fired.items() if n > 1} == {}  # nothing fired twice
    first_slot, last_slot = min(fired), max(fired)
    # the slots after the last one accounted before the kill (`seen`: fired ahead, into the
    # delayed zset) that are older than catchUpSeconds at the counting poll: missed
    missed = {s for s in range(seen // 1000 + 1, last_slot + 1)
              if s * 1000 < init - CATCH_UP * 1000}
    # every other slot fired: up to `seen`, the last catchUpSeconds of the gap, then on
    assert set(fired) == set(range(first_slot, last_slot + 1)) - missed
    assert seen // 1000 - killed < 5  # the fire-ahead horizon beyond the kill, no more
    assert len(missed) >= DOWN - CATCH_UP - 5  # the gap is down time less the fire-ahead
    assert missed_arg == len(missed) == counted == _missed(control_plane, namespace)
    assert int(r.hget(f"{QUEUE}:schedules", "missed:tick") or 0) == len(missed)
    assert last_slot >= init // 1000 + 3  # firing resumed
    print(f"down {init / 1000 - killed:.1f} s (kill to the counting poll); slots fired "
          f"{len(fired)}: {len([s for s in fired if s * 1000 <= seen])} before the kill, "
          f"{len([s for s in fired if seen < s * 1000 <= init])} in the catch-up window, "
          f"{len([s for s in fired if s * 1000 > init])} after; missed {len(missed)}")
    # what the monitor saw is what Redis holds: one task per slot fired (no worker runs)
    elements = [keys.Entry.decode(str(e)).element for e in r.zrange(f"{QUEUE}:delayed", 0, -1)]
    held = Counter(_second(keys.unwrap(str(e)).id.removeprefix("tick:"))
                   for e in elements + r.lrange(QUEUE, 0, -1))
    assert held == fired
