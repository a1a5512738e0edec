"""Seed 004 §4.3 (idempotent consumption) and §2.4 (one task id never processed twice at once),
on a real redis-server with in-process workers (`spec.worker.idempotency`)."""

from __future__ import annotations

import time

import pytest
import redis

from taskqueue import client as producer
from taskqueue.wire import keys, scripts
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker
from tests.redis.seeds import handlers as h

IDEMPOTENT = {"handler": "tests.redis.seeds.handlers:effect", "idempotency": {"windowSeconds": 60},
              "heartbeatSeconds": 0.3}
SCHEMA = keys.KeySchema(prefix="q", queues=(keys.QueueRef("q"),), dead_letter="q:dead")


def effects(r: redis.Redis) -> dict[str, int]:
    return {k: int(v) for k, v in r.hgetall(h.EFFECTS).items()}


def stat(r: redis.Redis, name: str) -> int:
    return int(r.hget(SCHEMA.stats, name) or 0)


def test_seed_004_4_3_redelivered_task_runs_once(make_worker: MakeWorker,
                                                  redis_sync: redis.Redis) -> None:
    """The same element delivered again after it completed is acked without running."""
    make_worker(worker=IDEMPOTENT)
    element = keys.wrap("0", task_id="order-42")
    redis_sync.lpush("q", element)
    wait_for("order-42's effect", lambda: effects(redis_sync).get("order-42") == 1)
    wait_for("1 completed", lambda: stat(redis_sync, "completed") == 1)
    redis_sync.lpush("q", element)  # a redelivery (as recovery or a producer retry would)
    wait_for("1 duplicate skipped", lambda: stat(redis_sync, "duplicates") == 1)
    assert effects(redis_sync) == {"order-42": 1}
    assert redis_sync.pttl(SCHEMA.done("order-42")) > 50_000  # window 60 s
    assert not redis_sync.exists(SCHEMA.running("order-42"))
    assert redis_sync.llen(SCHEMA.processing("w1")) == 0


def test_seed_004_4_3_finished_but_unacked_task_recovered_is_skipped(
        make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    """The seed's case: a worker finished the task and crashed before removing it from the
    processing list; the scan puts it back. Here a dead worker's processing list holds the
    entry of a completed id; the live worker recovers it and skips it."""
    make_worker(worker=IDEMPOTENT)
    producer.enqueue_sync(redis_sync, "q", "0", task_id="img-7")
    wait_for("img-7's effect", lambda: effects(redis_sync).get("img-7") == 1)
    entry = keys.Entry("q", "", keys.wrap("0", task_id="img-7")).encode()
    redis_sync.lpush(SCHEMA.processing("dead-1"), entry)
    redis_sync.zadd(SCHEMA.workers, {"dead-1": 1})  # heartbeat long expired
    wait_for("1 recovered", lambda: stat(redis_sync, "recovered") == 1)
    wait_for("1 duplicate skipped", lambda: stat(redis_sync, "duplicates") == 1)
    assert effects(redis_sync) == {"img-7": 1}


def test_seed_004_2_4_same_id_enqueued_twice_never_runs_concurrently(
        make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    """Two deliveries of one id on two workers at once: one runs, the other is deferred while
    the lease is held, then acked as a duplicate. Effect once, no overlap."""
    for wid in ("w1", "w2"):
        make_worker(worker_id=wid, worker=IDEMPOTENT)
    for _ in range(2):
        producer.enqueue_sync(redis_sync, "q", "0.5", task_id="pay-1")
    wait_for("1 duplicate skipped", lambda: stat(redis_sync, "duplicates") == 1, timeout=15)
    assert effects(redis_sync) == {"pay-1": 1}
    assert stat(redis_sync, "deferred") >= 1
    assert redis_sync.llen(h.OVERLAPS) == 0


def test_seed_004_4_3_worker_recovered_while_finishing_runs_once(
        make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    """w1 is (wrongly) recovered while its task is still running: the requeued copy goes to w2,
    which defers it while w1's lease lives; w1 completes and marks it done; w2 then skips it."""
    w1 = make_worker(worker_id="w1", worker=IDEMPOTENT)
    producer.enqueue_sync(redis_sync, "q", "1.0", task_id="mail-3")
    wait_for("mail-3 running", lambda: redis_sync.hexists(h.RUNNING, "mail-3"))
    keys_, args = scripts.recover_call(SCHEMA, worker_id="w1", max_attempts=5,
                                        reason="test: declared dead while alive")
    assert redis_sync.eval(scripts.lua("recover"), len(keys_), *keys_, *args) == [1, 0]
    make_worker(worker_id="w2", worker=IDEMPOTENT)
    wait_for("1 duplicate skipped", lambda: stat(redis_sync, "duplicates") == 1, timeout=15)
    assert effects(redis_sync) == {"mail-3": 1}
    assert stat(redis_sync, "deferred") >= 1
    assert redis_sync.llen(h.OVERLAPS) == 0
    assert w1.state.held_count() == 0


def test_seed_004_4_3_failed_attempt_leaves_no_marker_and_retries(
        make_worker: MakeWorker, redis_sync: redis.Redis) -> None:
    """The marker means done, not started: a failed attempt is retried and runs."""
    make_worker(worker={**IDEMPOTENT, "handler": "tests.redis.seeds.handlers:fail_once"},
                retry={"backoffSeconds": 0.05})
    producer.enqueue_sync(redis_sync, "q", "0", task_id="sms-9")
    wait_for("sms-9's effect", lambda: effects(redis_sync).get("sms-9") == 1)
    wait_for("1 completed", lambda: stat(redis_sync, "completed") == 1)
    assert stat(redis_sync, "failed") == 1
    assert stat(redis_sync, "duplicates") == 0
    assert not redis_sync.exists(SCHEMA.running("sms-9"))


def test_raw_payload_is_keyed_by_its_sha1(make_worker: MakeWorker,
                                          redis_sync: redis.Redis) -> None:
    make_worker(worker=IDEMPOTENT)
    redis_sync.lpush("q", "0")
    wait_for("1 completed", lambda: stat(redis_sync, "completed") == 1)
    assert redis_sync.exists(SCHEMA.done(keys.content_id("0")))
    redis_sync.lpush("q", "0")
    wait_for("1 duplicate skipped", lambda: stat(redis_sync, "duplicates") == 1)
    assert sum(effects(redis_sync).values()) == 1


@pytest.mark.parametrize("delivery", ["AtMostOnce"])
def test_at_most_once_also_skips_done_ids(make_worker: MakeWorker, redis_sync: redis.Redis,
                                          delivery: str) -> None:
    make_worker(worker=IDEMPOTENT, delivery=delivery)
    for _ in range(3):
        producer.enqueue_sync(redis_sync, "q", "0", task_id="once")
        time.sleep(0.3)
    wait_for("2 duplicates skipped", lambda: stat(redis_sync, "duplicates") == 2)
    assert effects(redis_sync) == {"once": 1}


def test_without_idempotency_a_redelivery_runs_again(make_worker: MakeWorker,
                                                     redis_sync: redis.Redis) -> None:
    """The control: the default worker runs every delivery (at-least-once)."""
    make_worker(worker={"handler": "tests.redis.seeds.handlers:effect"})
    for _ in range(2):
        producer.enqueue_sync(redis_sync, "q", "0", task_id="twice")
    wait_for("2 effects of 'twice'", lambda: effects(redis_sync).get("twice") == 2)


def test_worker_flag_and_manifest_set_the_window(redis_url: str) -> None:
    from taskqueue.worker import command as worker_command
    config, _, _ = worker_command.build(["--redis-url", redis_url, "--queue", "q", "--handler",
                                      "tests.redis.seeds.handlers:effect",
                                      "--idempotency-window", "3600"])
    assert config.idempotency_window == 3600.0
    config, _, _ = worker_command.build(["--redis-url", redis_url, "--queue", "q", "--handler",
                                      "tests.redis.seeds.handlers:effect"])
    assert config.idempotency_window is None


def test_window_below_one_second_is_refused() -> None:
    from taskqueue.api import manifest
    with pytest.raises(manifest.ManifestError, match="windowSeconds"):
        manifest.parse({"kind": "TaskQueue", "spec": {
            "redis": {"url": "redis://x"}, "queues": [{"key": "q"}],
            "worker": {"idempotency": {"windowSeconds": 0}}}})
