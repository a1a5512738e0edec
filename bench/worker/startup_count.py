"""Launch to first task of one `taskqueue-worker`, counted: the CPU instructions the process runs
(callgrind) and the taskqueue modules it has loaded when its first task starts, per checkout.

A worker pod's start (the operator's env: TASKQUEUE_WORKER_SETTINGS, TASKQUEUE_MANIFEST, no
flags), AtLeastOnce, concurrency 1, one task queued first; the handler (`startup_probe.py`,
beside this file) writes the modules loaded and ends the process there, so callgrind counts
launch to first task. Unlike a clock it does not move with the load of a shared machine (the
same checkout counts within 0.01 % run to run with PYTHONHASHSEED fixed; ~5M instructions
make a millisecond on this machine). Compile each checkout's bytecode first, as a worker image
has it (`scripts/env` sets PYTHONDONTWRITEBYTECODE):

    python -m compileall -q operator <base>/operator
    python bench/worker/startup_count.py --root . --root /work/wt/base30 [--runs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE)]

from bench_bullmq import QUEUE, pod_env  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402


def count(root: Path, url: str, r: redis.Redis, tmp: Path) -> tuple[int, list[str]]:
    """(instructions, taskqueue modules loaded) of one pod-mode start of `root`'s worker."""
    r.flushall()
    r.lpush(QUEUE, "first")
    out, modules = tmp / "callgrind.out", tmp / "modules.json"
    env = {**os.environ, **pod_env(url, handler="startup_probe:loaded"), "PYTHONHASHSEED": "0",
           "STARTUP_PROBE_OUT": str(modules),
           "PYTHONPATH": os.pathsep.join([str(root / "operator"), str(HERE), str(root)])}
    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                    sys.executable, "-m", "taskqueue.worker.main"], env=env, cwd=root,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600, check=False)
    summary = next(int(line.split()[1]) for line in out.read_text().splitlines()
                   if line.startswith("summary:"))
    return summary, json.loads(modules.read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--root", type=Path, action="append", required=True,
                   help="a checkout (repeat: alternated, the first is compared with the rest)")
    p.add_argument("--runs", type=int, default=2)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(data_dir=Path(tmp))
        server.start()
        try:
            r = redis.Redis.from_url(server.url)
            got: dict[Path, list[int]] = {}
            loaded: dict[Path, list[str]] = {}
            for _ in range(a.runs):
                for root in a.root:
                    n, loaded[root] = count(root.resolve(), server.url, r, Path(tmp))
                    got.setdefault(root, []).append(n)
                    print(f"{root}: {n:,} instructions, {len(loaded[root])} taskqueue modules",
                          flush=True)
        finally:
            server.stop()
    first = a.root[0]
    for root in a.root[1:]:
        print(f"{first} vs {root}: {min(got[first]) - min(got[root]):+,} instructions; "
              f"modules only in {first}: {sorted(set(loaded[first]) - set(loaded[root]))}; "
              f"only in {root}: {sorted(set(loaded[root]) - set(loaded[first]))}")


if __name__ == "__main__":
    main()
