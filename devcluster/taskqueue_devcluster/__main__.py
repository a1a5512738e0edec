"""Command line for the local control plane.

``python -m taskqueue_devcluster up [--state-dir DIR] [--kubelet-namespace NS ...]`` starts etcd,
kube-apiserver and kube-controller-manager (optionally a process kubelet), prints the admin
kubeconfig path and runs until Ctrl-C. ``down [--state-dir DIR]`` stops one started elsewhere.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from taskqueue_devcluster.controlplane import ControlPlane, ControlPlaneError
from taskqueue_devcluster.kubelet import DEFAULT_LABEL_SELECTOR, ProcessKubelet

DEFAULT_STATE_DIR = (
    Path(os.environ.get("TASKQUEUE_CACHE", Path.home() / ".cache" / "taskqueue-operator"))
    / "devcluster"
)


def _up(state_dir: Path, kubelet_namespaces: list[str], selector: str) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    state_dir.mkdir(parents=True, exist_ok=True)
    pid_file = state_dir / "pids.json"
    with ControlPlane(state_dir=state_dir) as cp:
        kubelet = None
        if kubelet_namespaces:
            kubelet = ProcessKubelet(
                cp.kubeconfig,
                namespaces=kubelet_namespaces,
                label_selector=selector,
                log_dir=state_dir / "pods",
            ).start()
        pid_file.write_text(json.dumps({"up": os.getpid(), **cp.pids}))
        print(f"control plane ready at {cp.server}", flush=True)
        print(f"export KUBECONFIG={cp.kubeconfig}", flush=True)
        print(f"export PATH={cp.bin_dir}:$PATH", flush=True)
        try:
            stop.wait()
        finally:
            if kubelet is not None:
                kubelet.stop()
            pid_file.unlink(missing_ok=True)
    return 0


def _down(state_dir: Path) -> int:
    pid_file = state_dir / "pids.json"
    if not pid_file.exists():
        print(f"nothing running (no {pid_file})", file=sys.stderr)
        return 1
    pids: dict[str, int] = json.loads(pid_file.read_text())
    up = pids.pop("up", None)
    if up is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(up, signal.SIGTERM)  # `up` stops its children itself
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and pid_file.exists():
            time.sleep(0.2)
    for pid in reversed(list(pids.values())):  # leftovers, if `up` died
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    print("control plane stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m taskqueue_devcluster``."""
    parser = argparse.ArgumentParser(prog="python -m taskqueue_devcluster")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start the control plane and run until Ctrl-C")
    up.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    up.add_argument(
        "--kubelet-namespace", action="append", default=[], help="also run a process kubelet"
    )
    up.add_argument("--selector", default=DEFAULT_LABEL_SELECTOR)
    down = sub.add_parser("down", help="stop a control plane started with `up`")
    down.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            return _up(args.state_dir, args.kubelet_namespace, args.selector)
        return _down(args.state_dir)
    except ControlPlaneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
