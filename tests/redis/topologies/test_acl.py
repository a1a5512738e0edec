"""Least-privilege ACL users on a real redis-server: the worker, the operator and the CLI each
work with exactly their rule (`taskqueue.redisio.acl`), and without any one command of it fail with
an error that names the command."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import redis

from taskqueue import client
from taskqueue.api import manifest, models
from taskqueue.controller.poller import Poller
from taskqueue.redisio import acl
from taskqueue.wire import flow, history, keys
from taskqueue.worker import resp
from tests.fixtures.redis_server import RedisServer
from tests.helpers.cli import Run
from tests.helpers.poll import observe_taskqueue
from tests.redis.topologies import handlers
from tests.redis.topologies.manifests import StartWorker, taskqueue

KEY_PATTERNS = ["{emails}*"]
QUEUES = [{"key": "{emails}:vip"}, {"key": "{emails}:normal", "type": "zset"}]
RETRY = {"deadLetterMaxLength": 1}
"""With the record _seed leaves, the recovery's poison pill trims the dead-letter list (LTRIM)."""
SCHEMA = keys.KeySchema.from_spec(
    manifest.parse(taskqueue("redis://x", queues=QUEUES, retry=RETRY)).spec)
MakeUser = Callable[..., str]


@pytest.fixture
def make_user(redis_server: RedisServer) -> Iterator[MakeUser]:
    """make_user(component, without=None) -> a redis:// URL of a new ACL user with that rule."""
    admin = redis.Redis.from_url(redis_server.url)
    admin.flushall()
    made: list[str] = []

    def make(component: acl.Component, *, without: str | None = None) -> str:
        name = f"tq-{component}-{secrets.token_hex(3)}"
        password = secrets.token_hex(8)
        admin.execute_command("ACL", "SETUSER", name, "on", f">{password}",
                              *acl.rule(component, KEY_PATTERNS, without=without).split())
        made.append(name)
        return f"redis://{name}:{password}@127.0.0.1:{redis_server.port}/0"

    yield make
    for name in made:
        admin.execute_command("ACL", "DELUSER", name)
    admin.script_flush()
    admin.close()


def _admin(redis_server: RedisServer) -> redis.Redis:
    return redis.Redis.from_url(redis_server.url, decode_responses=True)


def _seed(admin: redis.Redis) -> None:
    """Work for every code path: queued tasks, a dead worker holding one, no scripts loaded."""
    admin.script_flush()
    client.enqueue_many_sync(admin, "{emails}:vip", ["a", "b"])
    client.enqueue_sync(admin, "{emails}:normal", "z", priority=1)
    admin.zadd(SCHEMA.workers, {"dead": 1, "live": 10**13})
    admin.lpush(SCHEMA.processing("dead"), keys.Entry("{emails}:vip", "", "held").encode(),
                keys.Entry("{emails}:normal", "3", "zheld").encode(),
                keys.Entry("{emails}:vip", "", keys.wrap("poison", attempts=2)).encode())
    admin.lpush(SCHEMA.processing("live"), keys.Entry("{emails}:vip", "", "x").encode())
    admin.lpush(SCHEMA.dead_letter, json.dumps({"queue": "{emails}:vip", "payload": "older"}))


# -- operator --------------------------------------------------------------------------------
class _UrlSecret:
    """The one Secret the operator reads here: spec.redis.urlSecretRef's URL."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        return self.url


HISTORY = (history.Append(SCHEMA.decisions, {"t": "1", "rule": "hold"}, 10),
           history.Append(SCHEMA.history, {"t": "1", "dt": "10000"}, 10))
"""A decision entry and a history point, appended with the observe call."""


SCHEDULES = [
    {"name": "ahead", "cron": "* * * * * *", "queue": "{emails}:normal", "payload": "tick"},
    {"name": "alone", "cron": "* * * * * *", "queue": "{emails}:vip", "overlap": "Skip"},
]
"""Fired ahead into the delayed zset, and one that skips a slot while its last task waits."""
FLOW = {"maxInFlight": 5, "rateLimit": {"tasks": 10, "perSeconds": 1}}
"""Flow control on the first queue: the operator writes it into `<prefix>:flow`."""


async def _fire_and_sync(client_: Any, tq: models.TaskQueue, plain: models.TaskQueue,
                         admin_url: str) -> None:
    """What a poll writes besides the observation: the spec's flow control (then `plain`'s,
    without it), and three rounds of the schedules 3 s apart (each reads what the one before
    recorded). Between them the tasks fired leave the delayed zset, as a worker's promoter and
    fetch take them, so that the Skip schedule looks for its last task in the queue and the
    processing lists too."""
    from taskqueue.controller import schedules
    from taskqueue.redisio import flowops, queueops

    await flowops.sync(client_, SCHEMA, flow.declared(tq.spec.queues))
    await flowops.sync(client_, SCHEMA, flow.declared(plain.spec.queues))
    seen: dict[str, int | None] = {}
    start = time.time() - 10
    for now in (start, start + 3, start + 6):
        if seen:
            admin = redis.Redis.from_url(admin_url)
            admin.delete(SCHEMA.delayed)
            admin.close()
        plans = schedules.plan(tq.spec, SCHEMA, seen=seen, now=now, horizon=2.0)
        keys_, args = schedules.call(SCHEMA, plans)
        reply = await queueops.script("fire")(client_, keys=queueops.wire(keys_),
                                              args=queueops.wire(args))
        seen = schedules.seen_after(schedules.parse(reply, plans))


def _operator_round(url: str, admin_url: str) -> tuple[Any, str | None]:
    """What the operator does to a TaskQueue: observe it (appending to its history), recover a
    departed worker, quiesce one, write its flow control and fire its schedules."""
    spec = taskqueue(url, queues=[{**QUEUES[0], **FLOW}, QUEUES[1]])
    spec["spec"]["schedules"] = SCHEDULES
    tq = models.TaskQueue.model_validate(spec)
    plain = models.TaskQueue.model_validate(taskqueue(url, queues=QUEUES))
    poller = Poller(kube=cast(Any, _UrlSecret(url)))  # the URL (with a password) is in a Secret

    async def run() -> tuple[Any, str | None]:
        try:
            client_ = poller.pools.get(url)
            await client_.ping()  # the pool's health check
            obs, error = await observe_taskqueue(poller, tq, appends=HISTORY)
            if error is None:
                from taskqueue.redisio import queueops
                # spec.worker.tracking: the recovered tasks' index (HSET, PEXPIRE)
                await queueops.recover_worker(client_, SCHEMA, worker_id="dead", max_attempts=3,
                                              reason="test", tracking=True)
                await queueops.quiesce(client_, SCHEMA, add=["leaving"], remove=["back"])
                await _fire_and_sync(client_, tq, plain, admin_url)
            return obs, error
        except redis.RedisError as exc:
            return None, f"{type(exc).__name__}: {exc}"
        finally:
            await poller.pools.close()

    return asyncio.run(run())


def test_the_operator_works_with_exactly_its_rule(redis_server: RedisServer,
                                                  make_user: MakeUser) -> None:
    _seed(_admin(redis_server))
    obs, error = _operator_round(make_user("operator"), redis_server.url)
    assert error is None
    assert obs.backlog == {"{emails}:vip": 2, "{emails}:normal": 1}
    admin = _admin(redis_server)
    assert admin.llen("{emails}:vip") == 3  # "held" recovered
    assert admin.zcard("{emails}:normal") == 2 and admin.llen(SCHEMA.dead_letter) == 1
    assert admin.hget(SCHEMA.stats, keys.DEAD_TRIMMED_FIELD) == "1"
    [poison] = admin.keys(SCHEMA.task("*"))
    assert admin.hget(poison, "state") == "dead" and admin.pttl(poison) > 0
    assert admin.xlen(SCHEMA.decisions) == admin.xlen(SCHEMA.history) == 1


@pytest.mark.parametrize("missing", acl.commands("operator"))
def test_the_operator_without_one_permission_names_it(
        redis_server: RedisServer, make_user: MakeUser, missing: str) -> None:
    _seed(_admin(redis_server))
    _, error = _operator_round(make_user("operator", without=missing), redis_server.url)
    assert error is not None, f"the operator did not need {missing!r}"
    assert "NoPermissionError" in error and f"'{missing}'" in error


# -- CLI -------------------------------------------------------------------------------------
def _cli_session(cli: Run, url: str, tmp_path: Path, admin: redis.Redis) -> list[str]:
    """Every CLI command once; the stderr of the first that fails (empty when all pass)."""
    path = tmp_path / "tq.json"
    path.write_text(json.dumps(taskqueue(url, queues=QUEUES)))
    f = str(path)
    admin.lpush(SCHEMA.dead_letter, *[keys.dead_letter_record(
        entry=keys.Entry("{emails}:vip", "", keys.wrap(f"d{i}", task_id=f"t{i}")),
        task=keys.unwrap(keys.wrap(f"d{i}", task_id=f"t{i}")), attempts=3, error="x")
        for i in range(3)])
    steps = [
        ("enqueue", "-f", f, "{emails}:vip", "one"),
        ("enqueue", "-f", f, "--priority", "2", "{emails}:normal", "two"),
        ("enqueue", "-f", f, "--unique-for", "1m", "--track", "{emails}:vip", "three"),
        ("stats", "-f", f, "--json", "--interval", "0"),
        ("inflight", "-f", f, "--json"),
        ("status", "-f", f, "--json", "t9"),
        ("cancel", "-f", f, "--json", "t9"),
        ("dlq", "list", "-f", f, "--json"),
        ("dlq", "requeue", "-f", f, "--id", "t0"),
        ("dlq", "purge", "-f", f, "--yes"),
        ("pause", "-f", f, "{emails}:vip"),
        ("resume", "-f", f, "{emails}:vip"),
        ("drain", "-f", f, "--yes", "--batch", "1", "{emails}:vip"),
        ("drain", "-f", f, "--yes", "--batch", "1", "{emails}:normal"),
        ("simulate", "--from-history", "emails", "--current", f, "-f", f, "--since", "1m",
         "--tick", "1", "--json"),
    ]
    _history(admin)
    for step in steps:
        # the password is not in the manifest (the CRD refuses it): --redis-url, as from a Secret
        result = cli(*step, "--redis-url", url)
        if result.code != 0:
            return [" ".join(step), result.err]
    return []


def _history(admin: redis.Redis) -> None:
    """A point two hours old (before the window of --since 1m) and two of the last minute."""
    now = int(time.time() * 1000)
    admin.delete(SCHEMA.history)
    vip = history.QueuePoint(backlog=0, arrived=2, attempts=2, service_ms=400,
                             service_sq_ms2=80_000)
    for age in (7_200_000, 20_000, 10_000):
        point = history.HistoryPoint(t=now - age, dt=10_000, desired=1, replicas=1, ready=1,
                                     inflight=0, workers=1, queues={"{emails}:vip": vip})
        admin.xadd(SCHEMA.history, point.fields(), id=f"{now - age}-0")


def test_the_cli_works_with_exactly_its_rule(redis_server: RedisServer, make_user: MakeUser,
                                             cli: Run, tmp_path: Path) -> None:
    admin = _admin(redis_server)
    _seed(admin)
    assert _cli_session(cli, make_user("cli"), tmp_path, admin) == []
    assert admin.llen("{emails}:vip") == admin.zcard("{emails}:normal") == 0


@pytest.mark.parametrize("missing", [c for c in acl.commands("cli") if c != "unwatch"])
def test_the_cli_without_one_permission_names_it(
        redis_server: RedisServer, make_user: MakeUser, cli: Run, tmp_path: Path,
        missing: str) -> None:
    admin = _admin(redis_server)
    _seed(admin)
    failed = _cli_session(cli, make_user("cli", without=missing), tmp_path, admin)
    assert failed, f"the CLI did not need {missing!r}"
    assert f"'{missing}'" in failed[1] and "permission" in failed[1].lower()


def test_the_cli_needs_unwatch_to_report_a_refused_command_truthfully(
        redis_server: RedisServer, make_user: MakeUser, cli: Run, tmp_path: Path) -> None:
    """UNWATCH is sent only when a watched transaction fails; without it the CLI would report
    the missing UNWATCH instead of the command that was really refused."""
    admin = _admin(redis_server)
    _seed(admin)
    url = make_user("cli", without="rpush")
    user = url.split("//", 1)[1].split(":", 1)[0]
    admin.execute_command("ACL", "SETUSER", user, "-unwatch")
    failed = _cli_session(cli, url, tmp_path, admin)
    assert "'unwatch'" in failed[1]
    admin.execute_command("ACL", "SETUSER", user, "+unwatch")
    _seed(admin)
    failed = _cli_session(cli, url, tmp_path, admin)
    assert "'rpush'" in failed[1]


# -- worker ----------------------------------------------------------------------------------
def test_the_worker_works_with_exactly_its_rule(redis_server: RedisServer, make_user: MakeUser,
                                                start_worker: StartWorker) -> None:
    admin = _admin(redis_server)
    admin.script_flush()
    url = make_user("worker")
    admin.zadd(SCHEMA.workers, {"dead": 1})
    admin.lpush(SCHEMA.processing("dead"), keys.Entry("{emails}:vip", "", "held").encode())
    start_worker(url, worker_id="w1", worker={"concurrency": 2}, queues=QUEUES,
                 record_url=redis_server.url)
    start_worker(url, worker_id="w2", delivery="AtMostOnce", queues=QUEUES,
                 record_url=redis_server.url)
    client.enqueue_many_sync(admin, "{emails}:vip", [f"t{i}" for i in range(20)])
    client.enqueue_sync(admin, "{emails}:normal", "z", priority=1)
    from tests.fixtures.redis_cluster import wait_until
    wait_until(lambda: {f"t{i}" for i in range(20)} | {"z", "held"}
               <= set(admin.lrange(handlers.DONE, 0, -1)), timeout=20,
               what="the worker did not run every task")


BLOCKING_POPS = {"delivery": "AtMostOnce", "queues": [{"key": "{emails}:vip"}]}
"""A worker whose slots pop with BRPOP: the one that runs the flow thread (HGETALL)."""


@pytest.mark.parametrize(("missing", "spec"), [
    *[pytest.param(m, {"queues": QUEUES}, id=m)
      for m in ("evalsha", "zrangebyscore", "zadd", "rpop", "exists")],
    pytest.param("hgetall", BLOCKING_POPS, id="hgetall-blocking-pops"),
])
def test_the_worker_without_one_permission_names_it(
        redis_server: RedisServer, make_user: MakeUser, start_worker: StartWorker,
        caplog: pytest.LogCaptureFixture, missing: str, spec: dict[str, Any]) -> None:
    admin = _admin(redis_server)
    client.enqueue_sync(admin, "{emails}:vip", "t")
    admin.hset(SCHEMA.flow, flow.MAX + "{emails}:normal", "100")  # the flow thread reads it
    url = make_user("worker", without=missing)
    caplog.set_level(logging.WARNING)
    try:
        start_worker(url, worker_id="w1", record_url=redis_server.url, **spec)
    except resp.NoPermissionError as exc:  # at registration: the worker does not start
        assert f"'{missing}'" in str(exc)
        return
    from tests.fixtures.redis_cluster import wait_until
    wait_until(lambda: f"'{missing}'" in caplog.text, timeout=10,
               what=f"no log line named {missing!r}")


def test_the_worker_process_stops_with_one_line_naming_the_permission(
        redis_server: RedisServer, make_user: MakeUser, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from taskqueue.worker import command as worker_command
    url = make_user("worker", without="evalsha")
    path = tmp_path / "tq.json"
    doc = taskqueue(url, queues=QUEUES,
                    worker={"handler": "tests.redis.topologies.handlers:record"})
    path.write_text(json.dumps(doc))
    assert worker_command.main(["-f", str(path), "--redis-url", url, "--worker-id", "w1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'evalsha'" in err[0] and "taskqueue.redisio.acl worker" in err[0]
