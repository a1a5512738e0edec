"""The `taskqueue-worker` process: start-up errors, SIGTERM drain, SIGKILL chaos, Redis restart."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis

from taskqueue import client
from taskqueue.wire import keys
from taskqueue.worker.runner import EXIT_THREAD_DIED
from tests.fixtures.redis_server import RedisServer
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker
from tests.redis.worker.procs import spawn, worker_argv

HANDLERS = "tests.helpers.handlers"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--handler", "no_such_module:run"], "cannot import module",
                     id="import-error"),
        pytest.param(["--handler", "tests.helpers.handlers:missing"], "has no 'missing'",
                     id="unknown-function"),
        pytest.param(["--command", "/no/such/binary"], "not an executable", id="bad-command"),
        pytest.param([], "no handler", id="no-handler"),
    ],
)
def test_unusable_handler_exits_before_taking_a_task(redis_url: str, redis_sync: redis.Redis,
                                                     args: list[str], message: str) -> None:
    redis_sync.lpush("q", "untouched")
    proc = spawn(redis_url, "--queue", "q", *args)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert message in err.decode()
    assert redis_sync.lrange("q", 0, -1) == ["untouched"]
    assert not redis_sync.exists("q:workers")


def test_manifest_file_and_flags(tmp_path: Path, redis_url: str, redis_sync: redis.Redis) -> None:
    manifest = tmp_path / "tq.yaml"
    manifest.write_text(
        "apiVersion: taskqueue.dev/v1alpha1\nkind: TaskQueue\nmetadata: {name: demo}\n"
        "spec:\n  redis: {url: redis://unused:6379}\n  queues: [{key: vip}, {key: normal}]\n"
        f"  worker: {{handler: '{HANDLERS}:record'}}\n")
    redis_sync.lpush("normal", "n1")
    redis_sync.lpush("vip", "v1")
    proc = spawn(redis_url, "-f", str(manifest), "--worker-id", "m1", "--log-json")
    try:
        wait_for("2 tasks done", lambda: redis_sync.llen("test:done") == 2, timeout=15)
        assert redis_sync.lrange("test:done", 0, -1) == ["v1", "n1"]
        assert "m1" in redis_sync.zrange("vip:workers", 0, -1)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0
    assert b'"level": "INFO"' in err


def test_sigterm_drains_finishes_tasks_in_hand_and_gives_back_the_rest(
        redis_url: str, redis_sync: redis.Redis) -> None:
    redis_sync.lpush("q", *[f"t{i}:0.6" for i in range(12)])
    proc = spawn(redis_url, "--queue", "q", "--handler",
                 f"{HANDLERS}:note_start_sleep_then_record", "--concurrency", "2",
                 "--prefetch", "4", "--worker-id", "d1")
    # running, not only taken (an entry taken but not begun is given back unrun on SIGTERM)
    wait_for("2 tasks running in d1", lambda: redis_sync.llen("test:started") == 2, timeout=15)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=15)
    assert proc.returncode == 0
    done = redis_sync.lrange("test:done", 0, -1)
    assert len(done) == 2  # the two in hand finished, nothing else started
    left = redis_sync.lrange("q", 0, -1)
    assert sorted(done + left) == sorted(f"t{i}:0.6" for i in range(12))
    assert redis_sync.llen("q:processing:d1") == 0
    assert redis_sync.zscore("q:workers", "d1") is None
    # the given-back tasks were never attempted: no envelope, attempts unchanged
    assert all(not x.startswith(keys.ENVELOPE_MARK) for x in left)


def test_sigterm_idle_worker_exits_at_once(redis_url: str, redis_sync: redis.Redis) -> None:
    proc = spawn(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:record",
                 "--worker-id", "idle")
    wait_for("worker idle registered", lambda: redis_sync.zscore("q:workers", "idle"), timeout=15)
    time.sleep(0.2)
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert time.monotonic() - started < 1.5
    assert redis_sync.zscore("q:workers", "idle") is None


def test_sigterm_grace_over_gives_back_unfinished(redis_url: str, redis_sync: redis.Redis) -> None:
    client.enqueue_sync(redis_sync, "q", "long:30")
    proc = spawn(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:sleep_then_record",
                 "--grace", "0.5", "--worker-id", "g1")
    wait_for("1 task held by g1", lambda: redis_sync.llen("q:processing:g1") == 1, timeout=15)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 0
    (element,) = redis_sync.lrange("q", 0, -1)
    assert keys.unwrap(element).payload == "long:30" and keys.unwrap(element).attempts == 0


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_chaos_loses_nothing(tmp_path: Path, redis_url: str,
                                     redis_sync: redis.Redis) -> None:
    """5,000 tasks, 4 worker processes, one SIGKILLed every second and replaced by a new one
    (new id, like a pod): every task completed, duplicates at most kills x concurrency."""
    total, concurrency = 5000, 2
    client.enqueue_many_sync(redis_sync, "q", [str(i) for i in range(total)])

    def start(n: int) -> subprocess.Popen[bytes]:
        return spawn(redis_url, "--queue", "q", "--handler", f"{HANDLERS}:chaos",
                     "--concurrency", str(concurrency), "--heartbeat", "0.2",
                     "--max-attempts", "50", "--worker-id", f"c{n}",
                     log_path=tmp_path / f"worker-{n}.log")

    procs = [start(n) for n in range(4)]
    spawned, kills = 4, 0
    deadline = time.monotonic() + 90
    try:
        while len(set(redis_sync.lrange("test:done", 0, -1))) < total:
            assert time.monotonic() < deadline, "chaos run did not finish"
            time.sleep(1.0)
            victim = procs.pop(kills % len(procs))
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            kills += 1
            procs.append(start(spawned))
            spawned += 1
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=30)
    done = redis_sync.lrange("test:done", 0, -1)
    assert set(done) == {str(i) for i in range(total)}
    duplicates = len(done) - total
    assert kills >= 3
    print(f"chaos: {kills} kills, {duplicates} duplicates")
    assert duplicates <= kills * concurrency, (duplicates, kills)
    assert redis_sync.llen("q") == 0 and not redis_sync.keys("q:processing:*")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_redis_restart_mid_run_loses_nothing(redis_factory: type[RedisServer],
                                             make_worker: MakeWorker,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    server = redis_factory(appendonly=True)  # type: ignore[call-arg]
    r = redis.Redis.from_url(server.url, decode_responses=True)
    monkeypatch.setenv("TASKQUEUE_TEST_REDIS_URL", server.url)
    total = 3000
    client.enqueue_many_sync(r, "q", [str(i) for i in range(total)])
    for i in range(2):
        _worker_on(make_worker, server.url, f"r{i}")
    wait_for("500 tasks done", lambda: r.llen("test:done") > 500, timeout=20)
    server.restart(down_seconds=0.5)
    r = redis.Redis.from_url(server.url, decode_responses=True)
    wait_for("every task done",
             lambda: len(set(r.lrange("test:done", 0, -1))) >= total, timeout=60, every=0.2)
    assert set(r.lrange("test:done", 0, -1)) == {str(i) for i in range(total)}
    wait_for("queue and processing lists empty",
             lambda: not r.keys("q:processing:*") and r.llen("q") == 0, timeout=10)


def _worker_on(make_worker: MakeWorker, url: str, worker_id: str) -> object:
    return make_worker(worker_id=worker_id, handler=f"{HANDLERS}:chaos",
                       redis={"url": url}, worker={"concurrency": 2},
                       retry={"maxAttempts": 50, "backoffSeconds": 0.05})


def test_console_script_is_installed() -> None:
    exe = shutil.which("taskqueue-worker")
    assert exe is not None, "taskqueue-worker is not on PATH: install the package"
    assert worker_argv()[0] == exe
    proc = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: taskqueue-worker")


def test_a_thread_that_ends_makes_the_worker_exit_non_zero(make_worker: MakeWorker,
                                                          redis_sync: redis.Redis) -> None:
    """The heartbeat thread ends while the worker is not stopping (as a bug would end it):
    the worker drains and returns EXIT_THREAD_DIED instead of idling on."""
    worker = make_worker(start=False, worker_id="t1")

    def end_heartbeat() -> None:
        wait_for("the heartbeat thread", lambda: worker.heartbeat.loop.thread.is_alive(),
                 timeout=10)
        worker.heartbeat.loop.stop.set()

    threading.Thread(target=end_heartbeat, daemon=True).start()
    started = time.monotonic()
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        assert worker.run_until_signal() == EXIT_THREAD_DIED
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
    assert time.monotonic() - started < 10
    assert worker.stopped.is_set()
