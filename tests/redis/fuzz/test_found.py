"""The defects the fuzz suite found, each as a named scenario on a real redis-server (they fail
on the code before their fix).

- A counter of the stats hash that holds no integer (`HSET q:stats taken:q 1.5`) made HINCRBY
  fail inside a script after its first write: fetch.lua had popped the task (lost), fail.lua
  had removed it from the processing list (lost), heartbeat.lua failed every beat (the worker
  never started).
- A key of another type made observe.lua fail, so the operator's poll saw "Redis unreachable"
  (a WRONGTYPE without the key's name) and held the replica count for every queue.
- A workers-zset member with an infinite deadline, or a worker id or quiesced member that is not
  UTF-8, made the poll fail (OverflowError, UnicodeDecodeError); a quiesced member that is no
  processing-list key was "released" on every poll.
- An unknown Redis URL option (`?bogus=1`) passed the URL check: the CLI then failed with
  redis-py's TypeError traceback, the worker ignored it; and the worker ignored `?password=`,
  which redis-py (the CLI, the operator) uses.
- `taskqueue inflight` failed (OverflowError) on a worker whose deadline is infinite.
- A manifest nested 500 deep was a RecursionError traceback; a null field or `3.0` for an
  integer, which the API server takes, was refused with -f; the API server took a TLS setting
  without rediss://, Sentinel with mode cluster, a certKey without keyKey, a sentinel address
  that is not host:port and a wait target or service time of a key that is no queue, which the
  models refuse; a queue key with a vertical tab or a no-break space got one verdict from the
  models and another from the API server (their regex engines read a space class differently).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
import redis.asyncio as aioredis

from taskqueue.api import manifest, models
from taskqueue.controller import status
from taskqueue.controller.observe import observe
from taskqueue.redisio import queueops
from taskqueue.scaling import policy
from taskqueue.scaling.observation import QueueObservation
from taskqueue.wire import keys
from tests.fixtures.redis_server import RedisServer
from tests.helpers.cli import Run
from tests.helpers.wait import wait_for
from tests.helpers.worker import MakeWorker, in_process, make_config, stop_all

SCHEMA = keys.KeySchema(prefix="q", dead_letter="q:dead",
                        queues=(keys.QueueRef(key="q"), keys.QueueRef(key="h")))


@pytest.fixture
def raw(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


# -- counters -------------------------------------------------------------------------------

COUNTERS = ["taken:q", "completed", "failed", "retried", "dead", "recovered", "service_ms:q",
            "served:q"]


@pytest.mark.parametrize("value", [b"1.5", b"9223372036854775807"], ids=["float", "at-int64-max"])
@pytest.mark.parametrize("field", COUNTERS)
def test_a_counter_that_holds_no_integer_loses_no_task(
        raw: redis.Redis, handler_env: None, make_worker: MakeWorker, field: str,
        value: bytes) -> None:
    raw.hset(SCHEMA.stats, field, value)
    raw.rpush(SCHEMA.processing("gone"), b"q\n\nrecovered")  # a dead worker's task
    raw.zadd(SCHEMA.workers, {"gone": 1})
    raw.lpush("q", b"ok", b"retried!")  # "ok" is taken first; a '!' fails
    make_worker(handler="tests.redis.fuzz.handlers:record_or_fail", sweep=0.05,
                retry={"maxAttempts": 2, "backoffSeconds": 0},
                worker={"heartbeatSeconds": 0.1})
    wait_for("every task run or dead-lettered", lambda: (
        raw.llen("fuzz:done") == 2 and raw.llen(SCHEMA.dead_letter) == 1), timeout=20)
    assert sorted(json.loads(d) for d in raw.lrange("fuzz:done", 0, -1)) == ["ok", "recovered"]
    [record] = [json.loads(r) for r in raw.lrange(SCHEMA.dead_letter, 0, -1)]
    assert record["payload"] == "retried!"
    assert raw.hget(SCHEMA.stats, field) == value  # left as it is


# -- the operator's poll --------------------------------------------------------------------

def _taskqueue(url: str) -> models.TaskQueue:
    return manifest.parse({"kind": "TaskQueue", "spec": {
        "redis": {"url": url}, "queues": [{"key": "q"}, {"key": "h"}]}})


def _poll(url: str) -> tuple[QueueObservation | None, str | None, status.Status | None]:
    """One poll as the operator's: observe, decide, build the status."""
    tq = _taskqueue(url)

    async def run() -> tuple[QueueObservation | None, str | None]:
        client = aioredis.Redis.from_url(url)
        try:
            return await observe(client, url, tq)
        finally:
            await client.aclose()

    observation, error = asyncio.run(run())
    if observation is None:
        return None, error, None
    decision = policy.decide(spec=tq.spec.scaling, observation=observation,
                             state=policy.PolicyState(replicas=1), now=time.time())
    return observation, error, status.build_status(
        None, observation, decision, deployment="d", ready_replicas=1, error=error,
        generation=1, now=time.time())


WRONG = [
    pytest.param("h", lambda r: r.hset("h", "f", "v"), "hash", "list", id="queue-holds-a-hash"),
    pytest.param(SCHEMA.workers, lambda r: r.set(SCHEMA.workers, "x"), "string", "zset",
                 id="workers-zset-holds-a-string"),
    pytest.param(SCHEMA.delayed, lambda r: r.rpush(SCHEMA.delayed, "x"), "list", "zset",
                 id="delayed-zset-holds-a-list"),
    pytest.param(SCHEMA.dead_letter, lambda r: r.hset(SCHEMA.dead_letter, "f", "v"), "hash",
                 "list", id="dead-letter-list-holds-a-hash"),
    pytest.param(SCHEMA.stats, lambda r: r.set(SCHEMA.stats, "x"), "string", "hash",
                 id="stats-hash-holds-a-string"),
    pytest.param(SCHEMA.quiesced, lambda r: r.set(SCHEMA.quiesced, "x"), "string", "set",
                 id="quiesced-set-holds-a-string"),
    pytest.param(SCHEMA.processing("w1"), lambda r: (
        r.zadd(SCHEMA.workers, {"w1": 4e12}), r.set(SCHEMA.processing("w1"), "x")),
        "string", "list", id="processing-list-holds-a-string"),
]


@pytest.mark.parametrize(("key", "setup", "held", "expected"), WRONG)
def test_a_key_of_another_type_is_named_in_the_status_and_the_rest_is_read(
        raw: redis.Redis, redis_url: str, key: str, setup: object, held: str,
        expected: str) -> None:
    raw.lpush("q", "a", "b")
    setup(raw)  # type: ignore[operator]
    observation, error, new = _poll(redis_url)
    assert error is None and observation is not None and new is not None
    assert observation.backlog["q"] == 2
    assert [(w.key, w.held, w.expected) for w in observation.wrong_types] == [
        (key, held, expected)]
    conditions = {c["type"]: c for c in new["conditions"]}
    assert conditions["RedisReachable"]["status"] == "True"
    assert conditions["KeyTypes"]["status"] == "False"
    assert conditions["KeyTypes"]["message"].startswith(
        f"key {key!r} holds a {held}, not a {expected}: delete or fix it")


def test_every_key_of_its_type_gives_a_true_key_types_condition(
        raw: redis.Redis, redis_url: str) -> None:
    raw.lpush("q", "a")
    _, _, new = _poll(redis_url)
    assert new is not None
    assert {c["type"]: c["status"] for c in new["conditions"]}["KeyTypes"] == "True"


@pytest.mark.parametrize("deadline", [float("inf"), float("-inf"), 1e300])
def test_a_worker_deadline_of_any_score_is_read(raw: redis.Redis, redis_url: str,
                                                deadline: float) -> None:
    raw.zadd(SCHEMA.workers, {"w1": deadline})
    observation, error, _ = _poll(redis_url)
    assert error is None and observation is not None
    [worker] = observation.workers
    assert worker.alive(now=time.time()) == (deadline > 0)


def test_a_worker_id_that_is_not_utf8_is_read_with_its_tasks(raw: redis.Redis,
                                                             redis_url: str) -> None:
    raw.zadd(SCHEMA.workers, {b"w\xff": 4e12})
    raw.rpush(SCHEMA.processing("w").encode() + b"\xff", b"q\n\ntask")
    observation, error, _ = _poll(redis_url)
    assert error is None and observation is not None
    assert [w.in_flight for w in observation.workers] == [1]


@pytest.mark.parametrize("member", [b"\x80", b"w2", SCHEMA.processing("w\udcff").encode(
    "utf-8", "surrogateescape")], ids=["not-utf8", "not-a-processing-key", "utf8-invalid-id"])
def test_a_poll_that_releases_quiesced_workers_takes_any_member(
        raw: redis.Redis, redis_url: str, member: bytes) -> None:
    """A member that is no processing-list key quiesces nobody: it is not reported (it would be
    'released' on every poll); a processing key with any bytes is released."""
    raw.sadd(SCHEMA.quiesced, member)
    schema = keys.KeySchema.from_spec(_taskqueue(redis_url).spec)

    async def release() -> frozenset[str]:
        client = aioredis.Redis.from_url(redis_url)
        try:
            observation = await queueops.observe(client, schema)
            await queueops.quiesce(client, schema, add=(), remove=sorted(observation.quiesced))
            return observation.quiesced
        finally:
            await client.aclose()

    quiesced = asyncio.run(release())
    processing = member.startswith(schema.processing_prefix.encode())
    assert bool(quiesced) == processing
    assert raw.smembers(SCHEMA.quiesced) == (set() if processing else {member})


# -- Redis URL options ------------------------------------------------------------------------

UNKNOWN_OPTION = ("Redis URL option bogus is not supported; use db, health_check_interval, "
                  "max_connections, password, sentinel_password, sentinel_username, "
                  "socket_connect_timeout, socket_timeout, username, or an ssl_* option with "
                  "rediss://")


def test_an_unknown_url_option_is_one_line_from_the_cli(redis_url: str, cli: Run) -> None:
    result = cli("stats", "--redis-url", f"{redis_url}?bogus=1", "--queue", "q",
                 "--interval", "0")
    assert (result.code, result.out) == (2, "")
    assert result.err == f"taskqueue: --redis-url: {UNKNOWN_OPTION}\n"


def test_an_unknown_url_option_is_refused_by_the_model(redis_url: str) -> None:
    with pytest.raises(manifest.ManifestError) as refused:
        _taskqueue(f"{redis_url}?bogus=1")
    assert str(refused.value) == f"spec.redis: url: {UNKNOWN_OPTION}"


def test_an_unknown_url_option_stops_the_worker_with_one_line(
        redis_url: str, tmp_path: Path) -> None:
    path = tmp_path / "tq.json"
    path.write_text(json.dumps({"kind": "TaskQueue", "spec": {
        "redis": {"url": "redis://127.0.0.1:1/0"}, "queues": [{"key": "q"}],
        "worker": {"handler": "taskqueue.worker.builtin:sleep"}}}))
    proc = subprocess.run(
        [sys.executable, "-m", "taskqueue.worker.main", "-f", str(path), "--redis-url",
         f"{redis_url}?bogus=1"], capture_output=True, text=True, timeout=60, check=False)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == f"taskqueue-worker: --redis-url: {UNKNOWN_OPTION}\n"


def test_a_password_in_the_url_query_is_used_by_the_worker_as_by_the_cli(
        redis_factory: Callable[..., RedisServer], handler_env: None, cli: Run,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """redis-py (the CLI, the operator) authenticates with `?password=`; the worker's own
    connection ignored it and was refused (NOAUTH) on a server with a password."""
    server = redis_factory()
    redis.Redis(port=server.port).config_set("requirepass", "s3cret")
    url = f"redis://127.0.0.1:{server.port}/0?password=s3cret"
    monkeypatch.setenv("TASKQUEUE_TEST_REDIS_URL", url)
    assert cli("enqueue", "--redis-url", url, "--queue", "q", "q", "task").code == 0
    monkeypatch.setenv("TASKQUEUE_REDIS_URL", url)  # as a pod gets it from its Secret
    config = make_config(f"redis://127.0.0.1:{server.port}/0", sweep=0.05,
                         worker={"handler": "tests.redis.fuzz.handlers:record_or_fail"})
    worker = in_process(config)
    worker.start()
    try:
        client = redis.Redis(port=server.port, password="s3cret")
        wait_for("the task run", lambda: client.llen("fuzz:done") == 1, timeout=20)
    finally:
        stop_all([worker])


@pytest.mark.parametrize("deadline", [float("inf"), float("-inf")])
def test_inflight_shows_a_worker_whose_deadline_is_infinite(
        raw: redis.Redis, redis_url: str, cli: Run, deadline: float) -> None:
    raw.zadd(SCHEMA.workers, {"w1": deadline})
    raw.rpush(SCHEMA.processing("w1"), b"q\n\ntask")
    shown = cli("inflight", "--redis-url", redis_url, "--queue", "q", "--json")
    assert (shown.code, shown.err) == (0, "")
    [worker] = json.loads(shown.out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert (worker["state"], worker["heartbeat_in_seconds"], worker["in_flight"]) == (
        "alive" if deadline > 0 else "expired", None, 1)
    table = cli("inflight", "--redis-url", redis_url, "--queue", "q")
    assert (table.code, table.err) == (0, "")


# -- manifests --------------------------------------------------------------------------------

def test_a_manifest_nested_too_deeply_is_one_line_from_the_worker(tmp_path: Path) -> None:
    """PyYAML composes nested collections recursively: 500 levels were a RecursionError
    traceback."""
    path = tmp_path / "tq.yaml"
    path.write_text("kind: TaskQueue\nmetadata: {name: " + "[" * 500 + "]" * 500 + "}\n")
    proc = subprocess.run([sys.executable, "-m", "taskqueue.worker.main", "--print-settings",
                           "-f", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (f"taskqueue-worker: {path}: not valid YAML: collections nested more "
                           "than 64 deep (a manifest needs a few levels)\n")


AS_STORED = [
    pytest.param({"worker": {"handler": "a:b", "env": None, "idempotency": None}},
                 lambda tq: tq.spec.worker.env == [], id="null-list-is-unset"),
    pytest.param({"scaling": {"paused": None, "maxReplicas": 4}},
                 lambda tq: tq.spec.scaling.paused is False, id="null-bool-is-unset"),
    pytest.param({"retry": {"maxAttempts": 3.0}}, lambda tq: tq.spec.retry.maxAttempts == 3,
                 id="whole-float-is-an-integer"),
    pytest.param({"redis": {"url": "redis://r:6379/0", "waitForReplicas": -0.0}},
                 lambda tq: tq.spec.redis.waitForReplicas == 0, id="minus-zero-is-zero"),
]


@pytest.mark.parametrize(("fields", "check"), AS_STORED)
def test_a_manifest_reads_as_the_api_server_stores_it(fields: dict[str, object],
                                                      check: Callable[..., bool]) -> None:
    """The API server drops null fields and takes 3.0 for an integer field; the models refused
    both, so a file that kubectl applies failed with -f."""
    spec: dict[str, object] = {"redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "q"}]}
    tq = manifest.parse({"kind": "TaskQueue", "spec": {**spec, **fields}})
    assert check(tq)


def test_an_unknown_field_is_refused_even_when_null() -> None:
    with pytest.raises(manifest.ManifestError, match=r"spec\.bogus: Extra inputs"):
        manifest.parse({"kind": "TaskQueue", "spec": {
            "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "q"}], "bogus": None}})


def test_a_map_key_with_a_control_character_stays_on_its_problem_line() -> None:
    """A `\\r` in a key of scaling.expectedServiceSeconds was printed as it is: a terminal then
    wrote the rest of the problem over its start."""
    with pytest.raises(manifest.ManifestError) as refused:
        manifest.parse({"kind": "TaskQueue", "spec": {
            "redis": {"url": "redis://r:6379/0"}, "queues": [{"key": "q"}],
            "scaling": {"expectedServiceSeconds": {"q": "5", "\r": 0}}}})
    assert str(refused.value).splitlines() == [
        "spec.scaling.expectedServiceSeconds.q: Input should be a valid number",
        "spec.scaling.expectedServiceSeconds['\\r']: Input should be greater than 0"]
