"""Failover loss and the cost of durable mode, on real servers started here (loopback).

For Redis Cluster (6 nodes) and Sentinel (master + replica + 3 sentinels), default and durable
mode: push 3,000 tasks with 3 workers and kill the master after 1,000 acknowledged pushes (it is
restarted after the failover, as a pod would be), then count lost and duplicated tasks; and the
same run without a kill for the throughput. Also one standalone server for the baseline.

    python bench/failover/failover.py [--runs N]     (table for docs/benchmarks.md)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "operator")]

from tests.fixtures.redis_cluster import RedisCluster, SentinelGroup  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402
from tests.redis.topologies import chaos  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=3000)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tq-failover-"))
    recorder = RedisServer(data_dir=root / "recorder")
    recorder.start()
    rows: list[str] = []
    try:
        single = RedisServer(data_dir=root / "single")
        single.start()
        try:
            for durable in (False,):
                o = chaos.run(single.url, recorder.url, tasks=args.tasks, durable=durable)
                rows.append(f"| one server | default | no kill | {o.acked} | {o.lost} | "
                            f"{o.duplicated} | {o.rate:.0f} |")
        finally:
            single.stop()
        for topology in ("cluster", "sentinel"):
            for durable in (False, True):
                for kill in (False, True):
                    for run in range(args.runs if kill else 1):
                        rows.append(_one(root / f"{topology}-{durable}-{kill}-{run}", topology,
                                         durable, kill, recorder.url, args.tasks))
                        print(rows[-1], flush=True)
    finally:
        recorder.stop()
    print("| topology | mode | master killed | acked | lost | duplicated | tasks/s |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))


def _one(folder: Path, topology: str, durable: bool, kill: bool, record_url: str,
         tasks: int) -> str:
    mode = "durable" if durable else "default"
    if topology == "cluster":
        cluster = RedisCluster(root=folder)
        cluster.start()
        try:
            o = chaos.run(cluster.url, record_url, tasks=tasks, durable=durable, kill=(
                (lambda: cluster.kill_master_of(chaos.QUEUE, restart=True)) if kill else None))
        finally:
            cluster.stop()
    else:
        group = SentinelGroup(root=folder)
        group.start()
        try:
            o = chaos.run(group.url, record_url, tasks=tasks, durable=durable, kill=(
                (lambda: group.kill_master(restart=True)) if kill else None))
        finally:
            group.stop()
    return (f"| {topology} | {mode} | {'yes' if kill else 'no'} | {o.acked} | {o.lost} | "
            f"{o.duplicated} | {o.rate:.0f} |")


if __name__ == "__main__":
    main()
