"""A TaskQueue on a real 6-node Redis Cluster (3 masters, 3 replicas): the worker, the operator's
observe and the CLI through the cluster client, one slot per TaskQueue, and a master failover."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from taskqueue import client
from taskqueue.api import manifest
from taskqueue.controller.redisurls import RedisPools
from taskqueue.redisio import acl, clients, queueops
from taskqueue.wire import history, keys, scripts
from tests.fixtures.redis_cluster import RedisCluster, wait_until
from tests.helpers.cli import Run
from tests.redis.topologies import handlers
from tests.redis.topologies.manifests import StartWorker, taskqueue

SCHEMA = keys.KeySchema.from_spec(manifest.parse(taskqueue("redis://x", redis={
    "url": "redis://x", "mode": "cluster"})).spec)


def sync(url: str) -> clients.SyncClient:
    return clients.sync_client(clients.RedisSettings.from_dsn(url), decode_responses=True)


def evalsha_calls(node_client: clients.SyncClient) -> int:
    stats = node_client.info("commandstats").get("cmdstat_evalsha", {})
    return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


def test_every_key_of_a_taskqueue_is_in_one_slot_and_taskqueues_spread(
        redis_cluster: RedisCluster, cluster_url: str) -> None:
    r = sync(cluster_url)
    names = [*SCHEMA.queue_keys, SCHEMA.workers, SCHEMA.delayed, SCHEMA.starvation,
             SCHEMA.stats, SCHEMA.dead_letter, SCHEMA.processing("w1")]
    assert len({r.cluster_keyslot(k) for k in names}) == 1
    masters = {redis_cluster.master_of(f"{{tq{i}}}:jobs").port for i in range(30)}
    assert len(masters) == 3, "TaskQueues with different tags should use every master"


def test_workers_run_every_task_exactly_once_on_a_cluster(
        cluster_url: str, start_worker: StartWorker) -> None:
    for i in range(2):
        start_worker(cluster_url, worker_id=f"w{i}", worker={"prefetch": 4})
    r = sync(cluster_url)
    ids = client.enqueue_many_sync(r, "{emails}:vip", [f"v{i}" for i in range(100)])
    ids += client.enqueue_many_sync(r, "{emails}:normal", [f"n{i}" for i in range(100)])
    assert len(ids) == 200
    wait_until(lambda: r.llen(handlers.DONE) >= 200, timeout=30, what="200 tasks not done")
    done = r.lrange(handlers.DONE, 0, -1)
    assert sorted(done) == sorted([f"v{i}" for i in range(100)] + [f"n{i}" for i in range(100)])
    wait_until(lambda: r.hget(SCHEMA.stats, "completed") == "200", timeout=10,
               what="the acks were not counted")
    assert r.llen(SCHEMA.processing("w0")) == r.llen(SCHEMA.processing("w1")) == 0


async def test_operator_observe_is_one_call_on_the_taskqueues_node(
        redis_cluster: RedisCluster, cluster_url: str) -> None:
    r = sync(cluster_url)
    client.enqueue_many_sync(r, "{emails}:vip", ["a", "b"])
    r.zadd(SCHEMA.workers, {"w1": 10**13})
    r.lpush(SCHEMA.processing("w1"), keys.Entry("{emails}:vip", "", "x").encode())
    pools = RedisPools()
    try:
        aclient = pools.get(cluster_url)
        first = await queueops.observe(aclient, SCHEMA)  # learns the worker set (2 calls)
        node = redis_cluster.master_of("{emails}").client(decode_responses=True)
        before = evalsha_calls(node)
        for _ in range(5):
            obs = await queueops.observe(aclient, SCHEMA)
        assert evalsha_calls(node) - before == 5, "a steady poll is one EVALSHA"
    finally:
        await pools.close()
    assert first == obs.__class__(**{**obs.__dict__, "at": first.at})
    assert obs.backlog == {"{emails}:vip": 2, "{emails}:normal": 0}
    assert [(w.worker_id, w.in_flight) for w in obs.workers] == [("w1", 1)]


async def test_history_appends_go_with_the_observe_call_to_the_taskqueues_node(
        redis_cluster: RedisCluster, cluster_url: str) -> None:
    appends = (history.Append(SCHEMA.decisions, {"t": "1", "rule": "hold"}, 10),
               history.Append(SCHEMA.history, {"t": "1", "dt": "10000"}, 10))
    pools = RedisPools()
    try:
        aclient = pools.get(cluster_url)
        await queueops.observe(aclient, SCHEMA)  # learns the worker set
        node = redis_cluster.master_of("{emails}").client(decode_responses=True)
        before = evalsha_calls(node)
        obs, refused = await queueops.observe_appending(aclient, SCHEMA, appends=appends)
        assert evalsha_calls(node) - before == 1
        node.script_flush()  # a failed-over master: NOSCRIPT in the pipeline, loaded, read again
        again, refused_again = await queueops.observe_appending(aclient, SCHEMA, appends=appends)
    finally:
        await pools.close()
    assert refused == refused_again == (None, None)
    assert obs.backlog == again.backlog == {"{emails}:vip": 0, "{emails}:normal": 0}
    assert [f for _, f in node.xrange(SCHEMA.decisions)] == [{"t": "1", "rule": "hold"}] * 2
    assert node.xlen(SCHEMA.history) == 2


async def test_recovery_requeues_on_a_cluster(cluster_url: str) -> None:
    r = sync(cluster_url)
    element = keys.wrap("p", task_id="t1")
    r.lpush(SCHEMA.processing("dead"), keys.Entry("{emails}:normal", "", element).encode())
    r.zadd(SCHEMA.workers, {"dead": 1})
    aclient = clients.async_client(clients.RedisSettings.from_dsn(cluster_url),
                                      decode_responses=True)
    try:
        assert await queueops.recover_worker(aclient, SCHEMA, worker_id="dead", max_attempts=3,
                                             reason="gone") == (1, 0)
    finally:
        await aclient.aclose()
    assert keys.unwrap(r.rpop("{emails}:normal") or "").attempts == 1
    assert r.zscore(SCHEMA.workers, "dead") is None


def _manifest(tmp_path: Path, url: str) -> str:
    path = tmp_path / "tq.json"
    path.write_text(json.dumps(taskqueue(url, redis={"url": url})))
    return str(path)


def test_cli_enqueue_stats_inflight_and_dlq_on_a_cluster(
        cluster_url: str, cli: Run, tmp_path: Path) -> None:
    path = _manifest(tmp_path, cluster_url)
    result = cli("enqueue", "-f", path, "{emails}:vip", "one", "two")
    assert result.code == 0, result.err
    stats = cli("stats", "-f", path, "--json", "--interval", "0")
    assert stats.code == 0, stats.err
    assert stats.json()["queues"][0]["backlog"] == 2
    r = sync(cluster_url)
    r.zadd(SCHEMA.workers, {"w9": 10**13})
    r.lpush(SCHEMA.processing("w9"), keys.Entry("{emails}:vip", "", keys.wrap("held")).encode())
    inflight = cli("inflight", "-f", path, "--json")
    assert inflight.code == 0, inflight.err
    assert "held" in inflight.out
    r.lpush(SCHEMA.dead_letter, keys.dead_letter_record(
        entry=keys.Entry("{emails}:vip", "", "x"), task=keys.unwrap("x"), attempts=3,
        error="boom"))
    dlq = cli("dlq", "list", "-f", path, "--json")
    assert dlq.code == 0, dlq.err
    assert "boom" in dlq.out
    # the watched transactions of requeue and drain run on the TaskQueue's node
    requeue = cli("dlq", "requeue", "-f", path, "--all")
    assert requeue.code == 0, requeue.err
    assert r.llen(SCHEMA.dead_letter) == 0 and r.llen("{emails}:vip") == 3
    drain = cli("drain", "-f", path, "--yes", "--batch", "1", "{emails}:vip")
    assert drain.code == 0, drain.err
    assert r.llen("{emails}:vip") == 0


def test_cli_names_the_fix_for_keys_without_a_shared_hash_tag(
        cluster_url: str, cli: Run, tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    doc = taskqueue(cluster_url, queues=[{"key": "emails"}, {"key": "other"}])
    path.write_text(json.dumps(doc))
    result = cli("stats", "-f", str(path))
    assert result.code != 0
    assert "'other' -> '{emails}:other'" in result.err


@pytest.mark.timeout(180)
def test_a_worker_follows_a_master_failover(own_cluster: RedisCluster,
                                            start_worker: StartWorker) -> None:
    url = own_cluster.url
    start_worker(url, worker_id="w1")
    r = sync(url)
    client.enqueue_many_sync(r, "{emails}:vip", [f"a{i}" for i in range(20)])
    wait_until(lambda: r.llen(handlers.DONE) >= 20, timeout=20, what="first tasks not done")
    r.execute_command("WAIT", 1, 2000, target_nodes=r.get_node_from_key("{emails}"))
    own_cluster.kill_master_of("{emails}")
    deadline = time.monotonic() + 30
    while True:  # the producer's client follows the failover too
        try:
            client.enqueue_many_sync(r, "{emails}:vip", [f"b{i}" for i in range(20)])
            break
        except (clients.redis.ConnectionError, clients.redis.ResponseError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    wait_until(lambda: {f"b{i}" for i in range(20)} <= set(r.lrange(handlers.DONE, 0, -1)),
               timeout=60, what="the worker did not follow the failover")


def test_each_component_works_with_its_cluster_acl_rule(
        redis_cluster: RedisCluster, cluster_url: str, start_worker: StartWorker, cli: Run,
        tmp_path: Path) -> None:
    """The rules of taskqueue.redisio.acl with --cluster, created on every node."""
    urls = {}
    for component in ("worker", "operator", "cli"):
        name, password = f"tq-{component}", f"pw-{component}"
        for node in redis_cluster.nodes:
            node.client().execute_command(
                "ACL", "SETUSER", name, "on", f">{password}",
                *acl.rule(component, ["{emails}*"], cluster=True).split())
        urls[component] = cluster_url.replace("://", f"://{name}:{password}@", 1)
    try:
        start_worker(urls["worker"], worker_id="w1", record_url=cluster_url)
        path = _manifest(tmp_path, urls["cli"])
        # the password is not in the manifest (the CRD refuses it): --redis-url, as from a Secret
        assert cli("enqueue", "-f", path, "--redis-url", urls["cli"], "{emails}:vip", "one",
                   "two").code == 0
        r = sync(cluster_url)
        wait_until(lambda: r.llen(handlers.DONE) >= 2, timeout=20, what="tasks not run")
        pools = RedisPools()

        async def observe() -> tuple[int, tuple[object, ...]]:
            try:
                obs, refused = await queueops.observe_appending(
                    pools.get(urls["operator"]), SCHEMA,
                    appends=[history.Append(SCHEMA.decisions, {"t": "1"}, 10)])
                return obs.backlog["{emails}:vip"], refused
            finally:
                await pools.close()

        assert asyncio.run(observe()) == (0, (None,))
        stats = cli("stats", "-f", path, "--redis-url", urls["cli"], "--json", "--interval", "0")
        assert stats.code == 0, stats.err
    finally:
        for component in ("worker", "operator", "cli"):
            for node in redis_cluster.nodes:
                node.client().execute_command("ACL", "DELUSER", f"tq-{component}")


def test_the_lifecycle_keys_outside_the_scripts_keys_work_on_a_cluster(
        cluster_url: str, start_worker: StartWorker) -> None:
    """The task index and progress keys the scripts build from an id (not in their KEYS) share
    the TaskQueue's hash tag: recovery, tracked push, fetch, progress, status, cancel and
    cancelled.lua all run on a real 6-node cluster."""
    r = sync(cluster_url)
    vip = "{emails}:vip"
    r.lpush(SCHEMA.processing("dead"), keys.Entry(vip, "", keys.wrap("quick", task_id="t-held"))
            .encode())
    r.zadd(SCHEMA.workers, {"dead": 1})
    keys_, args = scripts.recover_call(SCHEMA, worker_id="dead", max_attempts=3, reason="gone",
                                       tracking=True)
    assert queueops.script("recover").sync(r, keys=keys_, args=args) == [1, 0]
    assert client.status_sync(r, "t-held", key_prefix=SCHEMA.prefix).state == "queued"
    long = client.enqueue_sync(r, vip, "long", track=True)
    assert client.status_sync(r, long, key_prefix=SCHEMA.prefix).state == "queued"

    start_worker(cluster_url, worker={"tracking": True,
                                      "handler": "tests.redis.topologies.handlers:until_cancelled"})
    seen = wait_until(lambda: (s := client.status_sync(r, long, key_prefix=SCHEMA.prefix))
                      .progress is not None and s, timeout=30, what="no progress in status")
    assert (seen.state, seen.worker, seen.worker_alive) == ("running", "w1", True)
    assert seen.progress is not None and seen.progress.message == "half"
    assert client.cancel_sync(r, long, key_prefix=SCHEMA.prefix).recorded
    wait_until(lambda: client.status_sync(r, long, key_prefix=SCHEMA.prefix).state ==
               "cancelled", timeout=30, what="the cancel did not stop the task")
    quick = client.enqueue_sync(r, vip, "quick", track=True)
    wait_until(lambda: client.status_sync(r, quick, key_prefix=SCHEMA.prefix).state == "done",
               timeout=30, what="the next task was not done")
    assert client.status_sync(r, "t-held", key_prefix=SCHEMA.prefix).state == "done"
    assert r.lrange(handlers.DONE, 0, -1) == ["quick", "cancelled:long", "quick"]
