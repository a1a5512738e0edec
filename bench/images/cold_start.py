"""Image sizes and worker cold start: container start -> first task handled.

    scripts/images && python bench/images/cold_start.py --trials 5

Starts a redis-server on a random loopback port, pushes one task, runs the worker image as the
chart's pods run it (uid 10001, `--read-only --cap-drop ALL`, host network) and measures from the
`run -d` call to the task's completion counter in Redis (polled every 10 ms). The engine and its
environment come from `scripts/images env`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import redis

REPO = Path(__file__).resolve().parents[2]


def engine_env() -> tuple[str, dict[str, str], dict[str, str]]:
    out = subprocess.run([str(REPO / "scripts/images"), "env"], capture_output=True, text=True,
                         check=True).stdout
    info = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    env = dict(os.environ)
    env.update({k: info[k] for k in ("CONTAINERS_CONF", "BUILDAH_RUNTIME") if info.get(k)})
    cli = "podman" if info["ENGINE"] == "buildah" else info["ENGINE"]
    return cli, env, info


def sizes(cli: str, env: dict[str, str], images: list[str]) -> dict[str, int]:
    result = {}
    for image in images:
        out = subprocess.run([cli, "image", "inspect", "--format", "{{.Size}}", image],
                             capture_output=True, text=True, env=env, check=True).stdout
        result[image] = int(out.strip())
    return result


def start_redis(data: Path) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen([shutil.which("redis-server") or "redis-server", "--bind", "127.0.0.1",
                             "--port", str(port), "--save", "", "--dir", str(data)],
                            stdout=subprocess.DEVNULL)
    for _ in range(200):
        try:
            redis.Redis(port=port).ping()
            return proc, port
        except redis.ConnectionError:
            time.sleep(0.02)
    raise SystemExit("redis-server did not start")


def one_trial(cli: str, env: dict[str, str], image: str, port: int) -> float:
    r = redis.Redis(port=port, decode_responses=True)
    r.flushall()
    r.lpush("cold:q", "x")
    manifest = json.dumps({
        "apiVersion": "taskqueue.dev/v1alpha1", "kind": "TaskQueue",
        "metadata": {"name": "cold", "namespace": "default"},
        "spec": {"redis": {"url": f"redis://127.0.0.1:{port}/0"}, "queues": [{"key": "cold:q"}],
                 "worker": {"handler": "taskqueue.worker.builtin:noop"}},
    })
    name = f"tq-cold-{uuid.uuid4().hex[:8]}"
    ro = ["--read-only", *(["--read-only-tmpfs=false"] if cli == "podman" else [])]
    argv = [cli, "run", "-d", "--name", name, "--network", "host", *ro,
            "--cap-drop", "ALL", "-e", f"TASKQUEUE_MANIFEST={manifest}", image]
    started = time.monotonic()
    subprocess.run(argv, env=env, capture_output=True, check=True)
    try:
        while r.hget("cold:q:stats", "completed") != "1":
            if time.monotonic() - started > 120:
                raise SystemExit("no task handled within 120 s")
            time.sleep(0.01)
        return time.monotonic() - started
    finally:
        subprocess.run([cli, "rm", "-f", "-t", "0", name], env=env, capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    cli, env, info = engine_env()
    images = [info["OPERATOR_IMAGE"], info["WORKER_IMAGE"]]
    for image, size in sizes(cli, env, images).items():
        print(f"{image}: {size / 1e6:.0f} MB")
    with tempfile.TemporaryDirectory() as data:
        proc, port = start_redis(Path(data))
        try:
            times = [one_trial(cli, env, info["WORKER_IMAGE"], port) for _ in range(args.trials)]
        finally:
            proc.terminate()
    print(f"cold start ({cli}, {args.trials} trials): min {min(times):.2f} s, "
          f"median {statistics.median(times):.2f} s, max {max(times):.2f} s")


if __name__ == "__main__":
    main()
