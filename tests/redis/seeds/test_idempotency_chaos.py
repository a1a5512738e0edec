"""Seed 004 §4.3 under SIGKILL chaos: worker processes killed mid-task and replaced, client
connections killed (fetch/claim/complete replies lost), live workers recovered while their
tasks were finishing, ids enqueued twice, and completed entries redelivered through a dead
worker's processing list. Every id's effect is applied
exactly once, and no id ever runs twice at the same time.

Kills land while a handler sleeps before its effect (the killer waits for a fresh "started"
record), so a killed attempt never applied its effect: exactly-once here is what the done
marker guarantees. A crash between a handler's own side effect and complete.lua is outside
what any marker can cover (docs/worker.md, "Idempotent consumption")."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from taskqueue import client as producer
from taskqueue.wire import keys, scripts
from tests.redis.seeds import handlers as h
from tests.redis.worker.procs import spawn

SCHEMA = keys.KeySchema(prefix="q", queues=(keys.QueueRef("q"),), dead_letter="q:dead")


def kill_a_running_worker(r: redis.Redis, procs: dict[int, subprocess.Popen[bytes]]) -> bool:
    """SIGKILL a worker whose handler started less than 50 ms ago (so it is still sleeping)."""
    while (record := r.lpop(h.STARTED)) is not None:
        pid, started, _ = str(record).split(" ", 2)
        proc = procs.get(int(pid))
        if proc is not None and time.time() - float(started) < 0.05:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            del procs[int(pid)]
            return True
    return False


def kill_worker_connections(r: redis.Redis) -> None:
    """Close every worker connection (replies in flight are lost), not the handlers' own (the
    effect they record must not fail half-way) nor ours."""
    me = r.client_id()
    for c in r.client_list():
        if c.get("name") != h.CLIENT_NAME and int(c["id"]) != me:
            r.client_kill_filter(_id=int(c["id"]))


def recover_a_live_worker(r: redis.Redis) -> int:
    """Declare a live worker dead while its task is finishing: recover.lua requeues its tasks
    (as a recoverer would after a missed heartbeat). 1 when one was found."""
    held = r.keys(f"{SCHEMA.processing_prefix}chaos-*")
    if not held:
        return 0
    live = str(held[0]).removeprefix(SCHEMA.processing_prefix)
    keys_, args = scripts.recover_call(SCHEMA, worker_id=live, max_attempts=50,
                                        reason="test: declared dead while alive")
    r.eval(scripts.lua("recover"), len(keys_), *keys_, *args)
    return 1


def redeliver_done(r: redis.Redis, dead: str) -> int:
    """Put entries of up to 3 completed ids into a dead worker's processing list (a finished
    but unacked task), for the live workers to recover; how many."""
    done_ids = list(r.hkeys(h.EFFECTS))[:3]
    if done_ids:
        r.lpush(SCHEMA.processing(dead), *[
            keys.Entry("q", "", keys.wrap("0.3", task_id=t)).encode() for t in done_ids])
        r.zadd(SCHEMA.workers, {dead: 1})
    return len(done_ids)


def state(r: redis.Redis) -> dict[str, object]:
    return {"effects": r.hlen(h.EFFECTS), "queued": r.llen("q"),
            "delayed": r.zcard(SCHEMA.delayed), "stats": r.hgetall(SCHEMA.stats),
            "processing": {k: r.llen(k) for k in r.keys("q:processing:*")},
            "workers": r.zrange(SCHEMA.workers, 0, -1, withscores=True)}


@dataclass
class Chaos:
    """The disruptions of one run and their counts; `step()` applies what is due."""

    r: redis.Redis
    start: Callable[[], subprocess.Popen[bytes]]
    procs: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    kills: int = 0
    conn_kills: int = 0
    live_recoveries: int = 0
    redelivered: int = 0
    next_kill: float = field(default_factory=lambda: time.monotonic() + 1.0)

    def step(self) -> None:
        if self.kills < 10 and time.monotonic() > self.next_kill and kill_a_running_worker(
                self.r, self.procs):
            self.kills += 1
            new = self.start()
            self.procs[new.pid] = new
            self.next_kill = time.monotonic() + 1.0
        if self.kills > self.live_recoveries * 2 and self.live_recoveries < 4:
            self.live_recoveries += recover_a_live_worker(self.r)
        if self.kills and self.kills % 2 == 0 and self.conn_kills < self.kills // 2:
            kill_worker_connections(self.r)
            self.conn_kills += 1
        if self.redelivered < 30:
            self.redelivered += redeliver_done(self.r, f"gone-{self.redelivered}")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_seed_004_4_3_sigkill_chaos_with_duplicate_deliveries_applies_each_effect_once(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    ids = [f"order-{i}" for i in range(150)]
    for i, tid in enumerate(ids):
        producer.enqueue_sync(redis_sync, "q", "0.3", task_id=tid)
        if i % 3 == 0:  # the same id enqueued twice
            producer.enqueue_sync(redis_sync, "q", "0.3", task_id=tid)
    spawned = 0

    def start() -> subprocess.Popen[bytes]:
        nonlocal spawned
        spawned += 1
        return spawn(redis_url, "--queue", "q", "--handler", "tests.redis.seeds.handlers:effect",
                     "--idempotency-window", "600", "--heartbeat", "0.3", "--prefetch", "3",
                     "--max-attempts", "50", "--worker-id", f"chaos-{spawned}",
                     log_path=tmp_path / f"worker-{spawned}.log")

    chaos = Chaos(redis_sync, start)
    chaos.procs = {p.pid: p for p in (start() for _ in range(5))}
    deadline = time.monotonic() + 150
    try:
        while len(redis_sync.hkeys(h.EFFECTS)) < len(ids):
            assert time.monotonic() < deadline, f"chaos run did not finish: {state(redis_sync)}"
            chaos.step()
            time.sleep(0.02)
        time.sleep(3)  # let deferred and redelivered copies come through before checking
    finally:
        for p in chaos.procs.values():
            p.send_signal(signal.SIGTERM)
        for p in chaos.procs.values():
            p.wait(timeout=30)
    effects = {k: int(v) for k, v in redis_sync.hgetall(h.EFFECTS).items()}
    duplicates = int(redis_sync.hget(SCHEMA.stats, "duplicates") or 0)
    print(f"chaos: {chaos.kills} kills, {chaos.conn_kills} connection kills, "
          f"{chaos.live_recoveries} live workers recovered, {chaos.redelivered} redelivered, "
          f"{duplicates} duplicate deliveries skipped")
    assert chaos.kills >= 5 and chaos.conn_kills >= 1 and chaos.live_recoveries >= 1
    assert effects == dict.fromkeys(ids, 1)
    assert redis_sync.llen(h.OVERLAPS) == 0
    assert duplicates >= 50 + chaos.redelivered // 2
    assert redis_sync.llen("q") == 0 and redis_sync.zcard(SCHEMA.delayed) == 0
    assert not redis_sync.keys("q:processing:*")


@pytest.mark.timeout(120)
def test_seed_004_4_3_crash_mid_task_does_not_skip_the_retry(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """The seed's SETNX-before-processing would mark the id at the start, and the retry after a
    crash would skip it: the effect would never happen. Here the marker means done: the worker
    is SIGKILLed mid-task, another recovers the task after the heartbeat expires, waits out the
    dead worker's lease, and runs it; attempt 2 applies the effect."""
    args = ("--queue", "q", "--handler", "tests.redis.seeds.handlers:effect", "--heartbeat", "0.3",
            "--idempotency-window", "600")
    victim = spawn(redis_url, *args, "--worker-id", "victim", log_path=tmp_path / "victim.log")
    producer.enqueue_sync(redis_sync, "q", "2.0", task_id="crash-1")
    deadline = time.monotonic() + 60
    while not redis_sync.hexists(h.RUNNING, "crash-1"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert redis_sync.exists(SCHEMA.running("crash-1"))  # the dead worker's lease
    assert not redis_sync.exists(SCHEMA.done("crash-1"))  # no marker: it did not finish
    survivor = spawn(redis_url, *args, "--worker-id", "survivor",
                     log_path=tmp_path / "survivor.log")
    try:
        while redis_sync.hget(h.EFFECTS, "crash-1") != "1":
            assert time.monotonic() < deadline, state(redis_sync)
            time.sleep(0.05)
    finally:
        survivor.send_signal(signal.SIGTERM)
        survivor.wait(timeout=30)
    assert int(redis_sync.hget(SCHEMA.stats, "recovered") or 0) == 1
    assert redis_sync.exists(SCHEMA.done("crash-1"))
    assert int(redis_sync.hget(SCHEMA.stats, "duplicates") or 0) == 0
