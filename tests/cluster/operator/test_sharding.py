"""Sharded operators (`--sharding`): three `taskqueue-operator` processes against the real API
server and a real redis-server. Who acted on a TaskQueue is read from each process's own
/metrics (`taskqueue_poll_duration_seconds_count` per TaskQueue: it rises only on the replica
that polls it); who should have is `ring.owner` of the uid over the shard Leases' holders. Each
TaskQueue's status.shard names its owner's identity (the holder of its shard Lease)."""

from __future__ import annotations

import itertools
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from taskqueue.controller import ring
from taskqueue.controller.kube import KubeClient
from taskqueue.controller.record import Records
from taskqueue.controller.shards import Shards
from taskqueue_devcluster import ControlPlane
from tests.fixtures.redis_server import free_port
from tests.helpers.kube import get, taskqueue
from tests.helpers.wait import wait_for

N = 24
LEASE, RENEW = 6, 1
SETTLE = 2 * RENEW
POLL = re.compile(r'^taskqueue_poll_duration_seconds_count\{namespace="[^"]+",'
                  r'taskqueue="([^"]+)"\} ([0-9.e+]+)$', re.M)
Counts = dict[str, dict[str, float]]
"""Per replica, per TaskQueue: polls so far."""


class Replica:
    def __init__(self, name: str, cp: ControlPlane, namespace: str, log: Path) -> None:
        self.name, self.port = name, free_port()
        self.log = log.open("wb")
        self.proc = subprocess.Popen(
            ["taskqueue-operator", "--kubeconfig", str(cp.kubeconfig), "--namespace", namespace,
             "--leader-election-namespace", namespace, "--sharding",
             "--shard-lease-seconds", str(LEASE), "--shard-renew-seconds", str(RENEW),
             "--metrics-port", str(self.port), "--metrics-address", "127.0.0.1",
             "--health-port", "0", "--log-format", "text"],
            env={**os.environ, "POD_NAME": name}, stdout=self.log, stderr=subprocess.STDOUT)

    def polls(self) -> dict[str, float]:
        if self.proc.poll() is not None:
            return {}
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            return {}
        return {tq: float(n) for tq, n in POLL.findall(text)}

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


@pytest.fixture
def replicas(control_plane: ControlPlane, namespace: str, crd: None,
             tmp_path: Path) -> Iterator[dict[str, Replica]]:
    started: dict[str, Replica] = {}
    yield started
    for r in started.values():
        r.stop()


def start(replicas: dict[str, Replica], name: str, cp: ControlPlane, namespace: str,
          tmp_path: Path) -> Replica:
    replicas[name] = Replica(name, cp, namespace, tmp_path / f"{name}.log")
    return replicas[name]


def holders(cp: ControlPlane, namespace: str) -> dict[str, str]:
    """Pod name -> holder identity of the live shard Leases."""
    found = get(cp, "leases", "-n", namespace, "-l", f"{ring.SHARD_LABEL}=taskqueue-operator")
    return {item["metadata"]["name"].removeprefix("taskqueue-operator-"):
            item["spec"]["holderIdentity"] for item in (found or {"items": []})["items"]
            if item["spec"].get("holderIdentity")}


def snapshot(replicas: dict[str, Replica]) -> Counts:
    return {name: r.polls() for name, r in replicas.items()}


def advanced(before: Counts, after: Counts) -> dict[str, set[str]]:
    """Per TaskQueue, the replicas that polled it between the two snapshots."""
    out: dict[str, set[str]] = {}
    for name, counts in after.items():
        for tq, n in counts.items():
            if n > before.get(name, {}).get(tq, 0):
                out.setdefault(tq, set()).add(name)
    return out


def expected_owners(uids: dict[str, str], live: dict[str, str]) -> dict[str, str]:
    by_identity = {identity: pod for pod, identity in live.items()}
    return {tq: by_identity[ring.owner(uid, by_identity) or ""] for tq, uid in uids.items()}


def steady(replicas: dict[str, Replica], seconds: float = 4.0) -> dict[str, set[str]]:
    first = snapshot(replicas)
    time.sleep(seconds)
    return advanced(first, snapshot(replicas))


def written_shards(cp: ControlPlane, namespace: str) -> dict[str, str | None]:
    """Per TaskQueue, the replica its status says polls it (status.shard)."""
    found = get(cp, "taskqueues", "-n", namespace)
    return {item["metadata"]["name"]: (item.get("status") or {}).get("shard")
            for item in found["items"]}


def create_taskqueues(cp: ControlPlane, namespace: str, redis_url: str) -> dict[str, str]:
    items = [taskqueue(f"tq{i:02d}", redis_url) for i in range(N)]
    cp.kubectl("apply", "-n", namespace, "-f", "-",
               input=yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    found = get(cp, "taskqueues", "-n", namespace)
    return {item["metadata"]["name"]: item["metadata"]["uid"] for item in found["items"]}


def test_taskqueues_split_join_moves_a_third_and_a_killed_replicas_share_is_taken_over(
        control_plane: ControlPlane, namespace: str, redis_url: str,
        replicas: dict[str, Replica], tmp_path: Path) -> None:
    cp = control_plane
    for name in ("a", "b"):
        start(replicas, name, cp, namespace, tmp_path)
    uids = create_taskqueues(cp, namespace, redis_url)
    wait_for("two shard Leases", lambda: len(holders(cp, namespace)) == 2, timeout=60)

    # -- two replicas: each TaskQueue polled by exactly the one the ring gives its uid ----------
    wait_for("every TaskQueue polled", lambda: len(steady(replicas, 2)) == N, timeout=90,
             every=0.5)
    live = holders(cp, namespace)
    owners = expected_owners(uids, live)
    polled = steady(replicas)
    assert polled == {tq: {owners[tq]} for tq in uids}, (polled, owners)
    split = {name: sum(1 for o in owners.values() if o == name) for name in ("a", "b")}
    assert all(n >= 4 for n in split.values()), split
    assert written_shards(cp, namespace) == {tq: live[owners[tq]] for tq in uids}

    # -- c joins: about a third move, all to c; none polled by two replicas in turn ---------------
    c = start(replicas, "c", cp, namespace, tmp_path)
    trail = [snapshot(replicas)]
    wait_for("c's Lease", lambda: "c" in holders(cp, namespace), timeout=30)
    joined = time.monotonic()
    while time.monotonic() - joined < SETTLE + 2 * RENEW + 3:
        time.sleep(0.25)
        trail.append(snapshot(replicas))
    live = holders(cp, namespace)
    after = expected_owners(uids, live)
    moved = {tq for tq in uids if after[tq] != owners[tq]}
    assert all(after[tq] == "c" for tq in moved)
    assert 0.15 * N <= len(moved) <= 0.55 * N, (len(moved), N)
    polled = steady(replicas)
    assert polled == {tq: {after[tq]} for tq in uids}, (polled, after)
    assert written_shards(cp, namespace) == {tq: live[after[tq]] for tq in uids}
    for tq in moved:  # the old owner's last poll comes before the new owner's first
        steps = [advanced(x, y).get(tq, set()) for x, y in itertools.pairwise(trail)]
        old = [i for i, s in enumerate(steps) if owners[tq] in s]
        new = [i for i, s in enumerate(steps) if "c" in s]
        assert new and (not old or max(old) <= min(new)), (tq, steps)
    assert c.polls()

    # -- SIGKILL b: its share goes to a and c once its Lease expires, not before ---------------
    theirs = {tq for tq, o in after.items() if o == "b"}
    assert theirs
    replicas["b"].proc.send_signal(signal.SIGKILL)
    replicas["b"].proc.wait()
    killed = time.monotonic()
    first = snapshot(replicas)
    time.sleep(LEASE - 2 * RENEW)
    early = advanced(first, snapshot(replicas))
    assert not any(early.get(tq) for tq in theirs), "taken over before b's Lease expired"
    survivors = {k: v for k, v in live.items() if k != "b"}
    final = expected_owners(uids, survivors)
    assert all(final[tq] == after[tq] for tq in uids if tq not in theirs)

    def all_polled_by_their_new_owner() -> bool:
        return steady(replicas, 1.5) == {tq: {final[tq]} for tq in uids}

    wait_for("b's TaskQueues polled by a and c", all_polled_by_their_new_owner,
             timeout=LEASE + 2 * RENEW + SETTLE + 10, every=0)
    took = time.monotonic() - killed
    print(f"b's {len(theirs)} TaskQueues polled by their new owners {took:.1f} s after SIGKILL")
    # the bound: Lease duration after b's last renewal seen + a listing + the margin + a poll
    assert took <= LEASE + RENEW + SETTLE + RENEW + 1 + 2.5, took
    assert steady(replicas) == {tq: {final[tq]} for tq in uids}


def test_shard_leases_renewed_listed_a_dead_ones_deleted_and_left_on_a_clean_stop(
        control_plane: ControlPlane, namespace: str) -> None:
    """`Shards` against the API server, on an injected clock for the membership."""
    client = KubeClient(str(control_plane.kubeconfig))
    now = [100.0]
    try:
        a, b = (Shards(client.api, namespace, "grp", pod=pod, identity=f"{pod}_1",
                       records=Records(), lease_seconds=4, renew_seconds=1,
                       clock=lambda: now[0]) for pod in ("a", "b"))
        a.round()
        b.round()
        a.round()
        assert a.membership.live(now[0]) == {"a_1", "b_1"}

        def names() -> list[str]:
            found = get(control_plane, "leases", "-n", namespace, "-l", f"{ring.SHARD_LABEL}=grp")
            return sorted(i["metadata"]["name"] for i in found["items"])

        assert names() == ["grp-a", "grp-b"]
        now[0] = 104.5  # b stopped renewing at 100 (SIGKILL): not live, its Lease still there
        a.round()
        assert a.membership.live(now[0]) == {"a_1"} and names() == ["grp-a", "grp-b"]
        now[0] = 116.5  # unchanged for more than four durations: a deletes it
        a.round()
        assert names() == ["grp-a"]
        a.leave()
        assert names() == []
    finally:
        client.close()
