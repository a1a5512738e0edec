"""A TaskQueue whose dead-letter list is one of its queues never starts a worker (`queues: [q, r]`
with `retry.deadLetterKey: r`); and when such a collision reaches Redis
anyway (a worker configured past every check, a record pushed into a queue by hand), a record
that fails again goes back as the same record, byte-exact, never nested inside a new one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from taskqueue.wire import keys
from tests.helpers import handlers as test_handlers
from tests.helpers.wait import wait_for
from tests.redis.worker.procs import ROOT, run_once, running

FAIL = "tests.helpers.handlers:always_fail"


def write_manifest(tmp_path: Path, url: str, spec: str) -> Path:
    path = tmp_path / "tq.yaml"
    path.write_text("apiVersion: taskqueue.dev/v1alpha1\nkind: TaskQueue\nmetadata: {name: t}\n"
                    f"spec:\n  redis: {{url: '{url}'}}\n  worker: {{handler: '{FAIL}'}}\n{spec}")
    return path


@pytest.mark.parametrize("spec, named", [
    pytest.param("  queues: [{key: q}, {key: r}]\n  retry: {deadLetterKey: r}\n",
                 "spec.queues[1].key 'r' is also spec.retry.deadLetterKey 'r'", id="the-issue"),
    pytest.param("  queues: [{key: q}, {key: 'q:dead'}]\n",
                 "spec.queues[1].key 'q:dead' is the default dead-letter list of "
                 "spec.queues[0].key 'q'", id="queue-named-like-the-dead-letter-list"),
    pytest.param("  queues: [{key: q}, {key: 'q:delayed'}]\n",
                 "spec.queues[1].key 'q:delayed' is <keyPrefix>:delayed", id="delayed-zset"),
    pytest.param("  queues: [{key: q}]\n  retry: {deadLetterKey: 'q:processing:w1'}\n",
                 "spec.retry.deadLetterKey 'q:processing:w1' is one of "
                 "<keyPrefix>:processing:<id>", id="dead-letter-list-is-a-processing-list"),
])
def test_a_colliding_manifest_stops_the_worker_before_it_touches_redis(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis, spec: str, named: str) -> None:
    result = run_once("-f", str(write_manifest(tmp_path, redis_url, spec)))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"taskqueue-worker: {named}")
    assert redis_sync.dbsize() == 0


def test_colliding_flags_stop_the_worker(redis_url: str, redis_sync: redis.Redis) -> None:
    result = run_once("--redis-url", redis_url, "--queue", "q", "--queue", "r",
                        "--dead-letter-key", "r", "--handler", FAIL)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "'r' is also spec.retry.deadLetterKey 'r'" in result.stderr
    assert redis_sync.dbsize() == 0


def test_a_record_pushed_into_a_queue_by_hand_is_dead_lettered_as_it_is(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    record = keys.dead_letter_record(entry=keys.Entry("other", "", "x"),
                                     task=keys.Task(payload="x", id="i7"), attempts=3,
                                     error="KeyError: 'x'", failed_at=1700000000.0)
    redis_sync.lpush("q", record)
    with running(redis_url, "--queue", "q", "--handler", FAIL, "--max-attempts", "2",
                 "--backoff", "0", log_path=tmp_path / "w.log"):
        wait_for("the record dead-lettered", lambda: redis_sync.llen("q:dead") == 1,
                 timeout=30)
    assert redis_sync.lrange("q:dead", 0, -1) == [record]
    assert redis_sync.llen("q") == 0 and redis_sync.zcard("q:delayed") == 0


def test_a_dead_letter_list_that_is_a_queue_keeps_one_record_of_one_size(
        tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    """The issue's loop, with the model's refusal bypassed: the record of a failed task is
    taken from `r` as a task, fails, and is dead-lettered into `r` again, round after round.
    Before, each round nested the previous record in a new one (48 MB within 3 s)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), test_handlers.URL_ENV: redis_url}
    log = (tmp_path / "w.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "tests.redis.worker.unchecked", redis_url, "q,r",
                             "r", FAIL, "1"], env=env, cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        redis_sync.lpush("q", "task-1")

        def rounds_done() -> bool:
            largest = max((len(e) for e in redis_sync.lrange("r", 0, -1)), default=0)
            return int(redis_sync.hget("q:stats", "dead") or 0) >= 12 or largest > 100_000

        wait_for("twelve rounds through the dead-letter list", rounds_done, timeout=60)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
    records = redis_sync.lrange("r", 0, -1)
    assert len(records) == 1, [len(r) for r in records]  # one task failed: one record
    first = json.loads(records[0])
    assert (first["queue"], first["payload"], first["attempts"]) == ("q", "task-1", 1)
    assert redis_sync.llen("q") == 0 and not redis_sync.exists("q:processing:unchecked")
