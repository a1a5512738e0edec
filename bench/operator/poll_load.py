"""Operator poll load: N TaskQueues polled every P seconds against a real redis-server.

Drives `taskqueue.controller.poller.Poller` exactly as the kopf daemon does (one asyncio loop per
TaskQueue, start-to-start interval), with an in-memory Kubernetes stand-in that counts the API calls
a poll makes (the API server's own cost is not measured here). Reports the process CPU (cores),
Redis commands per poll (from INFO commandstats) and Kubernetes calls per poll.

    python bench/operator/poll_load.py --taskqueues 500 --interval 5 --seconds 60 [--cluster]

A private redis-server (with --cluster: a 6-node Redis Cluster, 3 masters + 3 replicas, each
TaskQueue's keys under its own hash tag) is started on free ports and stopped afterwards.
Not part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import random
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from taskqueue.api import manifest
from taskqueue.controller.kube import DeploymentState, ObjectRef, PodState
from taskqueue.controller.poller import Poller
from taskqueue.controller.redisurls import RedisPools
from taskqueue.redisio import clients


class CountingKube:
    """Every `Kube` method, in memory, counting calls by name."""

    def __init__(self) -> None:
        self.calls: collections.Counter[str] = collections.Counter()
        self.replicas: dict[str, int] = {}
        self.hashes: dict[str, str] = {}

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        raise NotImplementedError

    async def get_taskqueue(self, namespace: str, name: str) -> dict[str, Any]:
        raise NotImplementedError

    async def get_deployment(self, namespace: str, name: str) -> DeploymentState | None:
        self.calls["get_deployment"] += 1
        if name not in self.replicas:
            return None
        return DeploymentState(name=name, replicas=self.replicas[name], ready_replicas=0,
                               selector={}, owner_uids=("uid",), spec_hash=self.hashes[name])

    async def create_deployment(self, body: dict[str, Any]) -> None:
        self.calls["create_deployment"] += 1
        name = body["metadata"]["name"]
        self.replicas[name] = body["spec"]["replicas"]
        self.hashes[name] = body["metadata"]["annotations"]["taskqueue.dev/spec-hash"]

    async def replace_deployment(self, body: dict[str, Any], *, replicas: int,
                                 resource_version: str) -> None:
        self.calls["replace_deployment"] += 1

    async def scale_deployment(self, namespace: str, name: str, replicas: int) -> None:
        self.calls["scale_deployment"] += 1
        self.replicas[name] = replicas

    async def list_pods(self, namespace: str, selector: dict[str, str]) -> list[PodState]:
        self.calls["list_pods"] += 1
        return []

    async def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        self.calls["annotate_pod"] += 1

    async def patch_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.calls["patch_status"] += 1

    async def event(self, ref: ObjectRef, *, type: str, reason: str, message: str) -> None:
        self.calls["event"] += 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_redis(tmp: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--port", str(port),
                             "--bind", "127.0.0.1", "--save", "", "--dir", tmp],
                            stdout=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    return proc, url


def command_calls(url: str) -> tuple[int, int]:
    """(EVALSHA + EVAL calls = round trips of observe, all commands incl. those inside Lua),
    summed over every node of a cluster DSN."""
    settings = clients.RedisSettings.from_dsn(url)
    scripts = total = 0
    for host, port in settings.hosts if settings.mode == "cluster" else settings.hosts[:1]:
        stats = redis.Redis(host=host, port=port).info("commandstats")
        scripts += sum(int(v["calls"]) for k, v in stats.items()
                       if k in ("cmdstat_evalsha", "cmdstat_eval"))
        total += sum(int(v["calls"]) for k, v in stats.items()
                     if k not in ("cmdstat_info", "cmdstat_cluster", "cmdstat_command"))
    return scripts, total


async def daemon(poller: Poller, body: dict[str, Any], interval: float, until: float,
                 polls: list[int]) -> None:
    tq = manifest.parse(body)
    record = poller.record(tq.metadata.namespace or "default", tq.metadata.name)
    loop = asyncio.get_running_loop()
    await asyncio.sleep(random.uniform(0, interval))  # spread, as objects appear over time
    while loop.time() < until:
        started = loop.time()
        await poller.poll(tq, uid="uid", record=record)
        polls[0] += 1
        await asyncio.sleep(max(0.0, interval - (loop.time() - started)))


async def run(args: argparse.Namespace, url: str) -> None:
    r = clients.sync_client(clients.RedisSettings.from_dsn(url))
    bodies = []
    for i in range(args.taskqueues):
        name = f"{{tq{i}}}" if args.cluster else f"tq{i}"
        bodies.append({"apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
                       "metadata": {"name": name, "namespace": "bench"},
                       "spec": {"redis": {"url": url}, "queues": [{"key": f"{name}:hi"},
                                                                  {"key": f"{name}:lo"}],
                                "scaling": {"pollIntervalSeconds": args.interval}}})
        if i % 3 == 0:
            r.lpush(f"{name}:hi", *[b"x"] * random.randint(1, 50))
    kube = CountingKube()
    poller = Poller(kube=kube, pools=RedisPools())  # type: ignore[arg-type]
    polls = [0]
    loop = asyncio.get_running_loop()
    # warm-up: first poll of everything (Deployment creation, script load)
    for b in bodies:
        tq = manifest.parse(b)
        await poller.poll(tq, uid="uid", record=poller.record("bench", tq.metadata.name))
    kube.calls.clear()
    before_scripts, before_total = command_calls(url)
    cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    until = loop.time() + args.seconds
    await asyncio.gather(*(daemon(poller, b, args.interval, until, polls) for b in bodies))
    cpu1, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - wall0
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    after_scripts, after_total = command_calls(url)
    await poller.pools.close()
    print(f"taskqueues={args.taskqueues} interval={args.interval}s wall={wall:.1f}s "
          f"polls={polls[0]} ({polls[0] / wall:.1f}/s)")
    print(f"operator CPU: {cpu:.2f}s = {cpu / wall:.3f} cores")
    print(f"redis round trips per poll: {(after_scripts - before_scripts) / polls[0]:.3f} "
          f"(EVALSHA of observe.lua); commands run inside it per poll: "
          f"{(after_total - before_total) / polls[0]:.1f}")
    print(f"redis connections (pools): {len(poller.pools) or 1} client(s) for one URL")
    per_poll = {k: round(v / polls[0], 3) for k, v in sorted(kube.calls.items())}
    print(f"kubernetes calls per poll: {per_poll}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--taskqueues", type=int, default=500)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--cluster", action="store_true", help="against a 6-node Redis Cluster")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.cluster:
            sys.path[:0] = [str(Path(__file__).resolve().parents[2])]
            from tests.fixtures.redis_cluster import RedisCluster
            cluster = RedisCluster(root=Path(tmp))
            cluster.start()
            try:
                asyncio.run(run(args, cluster.url))
            finally:
                cluster.stop()
            return
        proc, url = start_redis(tmp)
        try:
            asyncio.run(run(args, url))
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
