"""Simulator fidelity: the real operator and real worker pods on the real node against
`taskqueue simulate` on the same trace and manifest (issue 34, item 3).

`run` starts what tests/node/e2e starts (the images from scripts/images plus the handler image,
a control plane, a real node: kubelet, containerd, runc; the chart's operator as a pod; a private
redis-server), applies the TaskQueue of `tests/helpers/fidelity.manifest`, replays the 10-minute
trace (steady, burst, lull, batch, steady) at real time, records until the fleet is back at zero
and writes the measurement as JSON. `compare` runs `taskqueue simulate` on the same trace and
manifest, with the start-up, API and exit delays that run measured (`--constants`: the
defaults of `taskqueue.simulate.world` instead), 11 times with the first poll within 0.5 s of
the run's poll phase at the batch (`fidelity.simulate_around`: the median of each figure), and
prints both side by side with the tolerances (worker-seconds and p95 wait within 15 %, max
replicas within 1) and, with `--svg`, writes the replicas of both over time.

    python bench/scaling/fidelity.py run --out /tmp/fidelity.json        # ~13 min, node lock
    python bench/scaling/fidelity.py compare /tmp/fidelity.json --svg docs/images/fidelity.svg

Not part of the tests (tests/node/e2e/test_fidelity.py runs a 2.5-minute version).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import redis

from taskqueue.simulate.trace import Arrival

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "devcluster"))

from tests.fixtures.images import SCRIPT, Engine  # noqa: E402
from tests.fixtures.redis_server import RedisServer  # noqa: E402
from tests.helpers import fidelity  # noqa: E402
from tests.node.e2e.conftest import _handler_image, _save  # noqa: E402

from taskqueue_devcluster import ControlPlane  # noqa: E402
from taskqueue_devcluster.node import NODE_CONTROLLERS, RealNode, nodeconfig  # noqa: E402

CHART = ROOT / "charts" / "taskqueue-operator"
NS, NAME, QUEUE = "fidelity", "fid", "fid:q"


def engine() -> Engine:
    """Both images built (cached layers), as the `engine` fixture does."""
    subprocess.run([str(SCRIPT)], check=True, capture_output=True, timeout=1800)
    out = subprocess.run([str(SCRIPT), "env"], check=True, capture_output=True, text=True,
                         timeout=600).stdout
    info = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    env = {**os.environ,
           **{k: info[k] for k in ("CONTAINERS_CONF", "BUILDAH_RUNTIME") if info.get(k)}}
    return Engine(name=info["ENGINE"], env=env, operator_image=info["OPERATOR_IMAGE"],
                  worker_image=info["WORKER_IMAGE"])


@contextlib.contextmanager
def node_cluster(work: Path) -> Iterator[tuple[ControlPlane, RedisServer, str]]:
    """Control plane + real node with the images and the chart's operator; yields the Redis
    URL pods use."""
    eng = engine()
    server = RedisServer(data_dir=work / "redis")
    server.start()
    redis.Redis(port=server.port).config_set("protected-mode", "no")
    state = Path(tempfile.mkdtemp(prefix="tqfid-"))
    try:
        with ControlPlane(state_dir=work / "cp", controllers=NODE_CONTROLLERS) as cp, \
                RealNode(cp, state_dir=state) as node:
            images = (eng.operator_image, eng.worker_image, _handler_image(eng, work))
            for n, image in enumerate(images):
                node.load_image(_save(eng, image, work / f"image{n}.tar"))
            cp.kubectl("create", "namespace", NS)
            cp.helm("install", "fid", str(CHART), "-n", NS, "--set",
                    f"watchNamespaces={{{NS}}}", "--wait", "--timeout", "240s", timeout=300)
            yield cp, server, f"redis://{nodeconfig.POD_GATEWAY}:{server.port}/0"
            cp.helm("uninstall", "fid", "-n", NS, "--wait", check=False)
        if not node.mounts():
            shutil.rmtree(state, ignore_errors=True)
    finally:
        server.stop()


def run(args: argparse.Namespace) -> None:
    shape = fidelity.REDUCED if args.reduced else fidelity.FULL
    arrivals = fidelity.make_trace(shape, queue=QUEUE)
    with tempfile.TemporaryDirectory() as tmp, node_cluster(Path(tmp)) as (cp, server, url):
        tq = fidelity.manifest(name=NAME, namespace=NS, redis_url=url,
                               image="localhost/taskqueue-e2e-worker:1", queue=QUEUE,
                               startup=args.pod_startup)
        cp.kubectl("apply", "-f", "-", input=json.dumps(tq))
        r = redis.Redis(port=server.port)
        print(f"replaying {len(arrivals)} tasks over {shape.duration:.0f} s", flush=True)
        measured = fidelity.record(arrivals, kubeconfig=cp.kubeconfig, namespace=NS, name=NAME,
                                   r=r, queue=QUEUE)
    measured.note_setting(shape, pod_startup=args.pod_startup)
    measured.dump_json(Path(args.out))
    print(f"wrote {args.out}")
    show(measured, tq, shape, arrivals, svg=None)


def show(measured: fidelity.Measured, tq: dict[str, Any], shape: fidelity.Shape,
         arrivals: Sequence[Arrival], *, svg: Path | None,
         delays: fidelity.Delays | None = None) -> None:
    """The comparison, the simulation calibrated on the run's own delays unless `delays`."""
    delays = delays or measured.delays()
    phase = fidelity.batch_phase(measured, shape, arrivals, tq)
    print(f"simulated with {' '.join(delays.flags())} --poll-phase {phase:.2f} "
          f"+/- {fidelity.PHASE_SPREAD:g} s")
    simulated = fidelity.simulate_around(arrivals, tq, delays=delays, poll_phase=phase)
    checks = fidelity.compare(measured, simulated)
    print(fidelity.report(measured, simulated, checks))
    if svg is not None:
        svg.write_text(plot(measured.timeline(), simulated.timeline, measured.enqueued,
                            measured.start))
        print(f"wrote {svg}")


def compare(args: argparse.Namespace) -> None:
    measured = fidelity.Measured.load_json(Path(args.measured))
    shape, pod_startup = measured.setting()
    arrivals = fidelity.make_trace(shape, queue=QUEUE)
    tq = fidelity.manifest(name=NAME, namespace=NS, redis_url="redis://redis:6379/0",
                           image="worker", queue=QUEUE, startup=pod_startup)
    fixed = fidelity.Delays() if args.constants else None
    show(measured, tq, shape, arrivals, svg=Path(args.svg) if args.svg else None, delays=fixed)


def plot(real: Sequence[tuple[float, int]], sim: Sequence[tuple[float, int]],
         enqueued: dict[str, float], start: float) -> str:
    """An SVG: live pods over time, real and simulated, and the arrivals per 10 s below."""
    width, height, left, top = 900, 360, 50, 20
    end = max(t for t, _ in real)  # the simulation's tail after the fleet is at zero left out
    sim = [(t, n) for t, n in sim if t <= end]
    peak = max(max(n for _, n in real), max(n for _, n in sim), 1)
    plot_h = 220

    def x(t: float) -> float:
        return left + (width - left - 20) * t / end

    def y(n: float) -> float:
        return top + plot_h - plot_h * n / (peak + 1)

    def steps(points: Sequence[tuple[float, int]]) -> str:
        out, last = [], None
        for t, n in points:
            if last is not None:
                out.append(f"{x(t):.1f},{y(last):.1f}")
            out.append(f"{x(t):.1f},{y(n):.1f}")
            last = n
        return " ".join(out)

    buckets: dict[int, int] = {}
    for at in enqueued.values():
        buckets[int((at - start) // 10)] = buckets.get(int((at - start) // 10), 0) + 1
    top_bucket = max(buckets.values(), default=1)
    bars = "".join(
        f'<rect x="{x(b * 10):.1f}" y="{height - 20 - 80 * n / top_bucket:.1f}" '
        f'width="{x(10) - x(0) - 1:.1f}" height="{80 * n / top_bucket:.1f}" fill="#bbb"/>'
        for b, n in sorted(buckets.items()))
    grid = "".join(
        f'<line x1="{left}" x2="{width - 20}" y1="{y(n):.1f}" y2="{y(n):.1f}" stroke="#eee"/>'
        f'<text x="{left - 8}" y="{y(n) + 4:.1f}" font-size="11" text-anchor="end">{n}</text>'
        for n in range(0, peak + 1, max(1, peak // 4)))
    ticks = "".join(
        f'<text x="{x(t):.1f}" y="{top + plot_h + 14}" font-size="11" '
        f'text-anchor="middle">{t}s</text>' for t in range(0, int(end) + 1, 60))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif">'
        f'<rect width="{width}" height="{height}" fill="white"/>{grid}{ticks}{bars}'
        f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{steps(real)}"/>'
        f'<polyline fill="none" stroke="#d62728" stroke-width="1.5" stroke-dasharray="5,3" '
        f'points="{steps(sim)}"/>'
        f'<text x="{left + 10}" y="{top + 12}" font-size="12" fill="#1f77b4">real node: live '
        f'worker pods</text>'
        f'<text x="{left + 10}" y="{top + 28}" font-size="12" fill="#d62728">taskqueue simulate'
        f'</text>'
        f'<text x="{left + 10}" y="{height - 4}" font-size="11" fill="#666">grey: tasks '
        f'enqueued per 10 s (max {top_bucket})</text></svg>\n')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(required=True)
    r = sub.add_parser("run", help="replay on the real node, write the measurement")
    r.add_argument("--out", required=True, help="JSON file for the measurement")
    r.add_argument("--reduced", action="store_true", help="the node test's 2.5-minute trace")
    r.add_argument("--pod-startup", type=float, default=fidelity.POD_STARTUP,
                   help="the manifest's scaling.podStartupSeconds")
    r.set_defaults(func=run)
    c = sub.add_parser("compare", help="simulate the measured run's trace, compare")
    c.add_argument("measured", help="JSON written by `run`")
    c.add_argument("--svg", help="write the replicas over time here")
    c.add_argument("--constants", action="store_true",
                   help="simulate with the default node delays of taskqueue.simulate.world "
                   "instead of the ones this run measured")
    c.set_defaults(func=compare)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
