"""Schedules on the real node: lateness, slot time -> handler start, over 1,000 slots.

    flock /work/wt/node.lock python bench/schedules/node_lateness.py \\
        [--schedules 10 --seconds 100 --out bench/schedules/node_lateness.json]

Builds the images (`scripts/images`, cached layers), starts its own control plane and real
node (kubelet, containerd, runc; `tests/node/e2e/conftest.running_node`), installs the chart
with helm, and measures `--schedules` every-second schedules (`* * * * * *`, six-field cron with
seconds first) of one TaskQueue for `--seconds` slots each (`tests/node/e2e/lateness.py`: the
operator pod fires ahead into the delayed zset, the worker pod's promoter and slots start the
tasks; its handler logs each task's id and start). Writes the figures, every lateness in ms
and the machine's load to `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT), str(ROOT / "devcluster")]

from tests.fixtures.images import build_images  # noqa: E402
from tests.node.e2e.conftest import running_node  # noqa: E402
from tests.node.e2e.lateness import Release  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--schedules", type=int, default=10)
    p.add_argument("--seconds", type=int, default=100)
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "schedules" /
                   "node_lateness.json")
    args = p.parse_args()
    engine = build_images()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="node-late-") as tmp, \
            running_node(engine, Path(tmp)) as nc:
        release = Release(nc, namespace="late", release="late")
        release.install()
        try:
            started = time.time()
            run = release.measure(schedules=args.schedules, seconds=args.seconds)
            load_after = os.getloadavg()
        finally:
            release.uninstall()
    summary = run.summary()
    result = {"command": " ".join(["python", "bench/schedules/node_lateness.py", *sys.argv[1:]]),
              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "load_average_before": [round(x, 1) for x in load_before],
              "load_average_after": [round(x, 1) for x in load_after],
              **summary, "lateness_ms": [round(x, 2) for x in run.lateness_ms]}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "lateness_ms"}, indent=1))


if __name__ == "__main__":
    main()
