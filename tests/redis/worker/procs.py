"""Helpers to run `taskqueue-worker` as a real subprocess in tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import handlers as test_handlers

ROOT = Path(__file__).resolve().parents[3]


def worker_argv(*args: str) -> list[str]:
    exe = shutil.which("taskqueue-worker")
    if exe:
        return [exe, *args]
    return [sys.executable, "-m", "taskqueue.worker.main", *args]


def spawn(redis_url: str, *args: str, log_path: Path | None = None,
          pythonpath: tuple[str, ...] = (), handler_url: str | None = None,
          ) -> subprocess.Popen[bytes]:
    """`taskqueue-worker --redis-url URL ARGS...`; `pythonpath` goes first on the path (e.g. a
    sitecustomize that fakes the clock); the test handlers record over `handler_url` (default
    the worker's URL)."""
    path = [*pythonpath, str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path),
           test_handlers.URL_ENV: handler_url or redis_url}
    env.pop("TASKQUEUE_MANIFEST", None)
    env.pop("TASKQUEUE_WORKER_SETTINGS", None)
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen(worker_argv("--redis-url", redis_url, *args), env=env, cwd=ROOT,
                            stdout=out, stderr=subprocess.STDOUT if log_path else subprocess.PIPE)


def run_once(*args: str) -> subprocess.CompletedProcess[str]:
    """`taskqueue-worker ARGS...` to its exit (a start that fails), without the settings a
    pod's environment could hold."""
    path = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    for name in ("TASKQUEUE_MANIFEST", "TASKQUEUE_WORKER_SETTINGS", "TASKQUEUE_REDIS_URL"):
        env.pop(name, None)
    return subprocess.run(worker_argv(*args), env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)


@contextlib.contextmanager
def running(redis_url: str, *args: str, log_path: Path, pythonpath: tuple[str, ...] = (),
            handler_url: str | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """A worker process for the duration of the block, stopped with SIGTERM after it (killed
    if it does not exit within 20 s)."""
    proc = spawn(redis_url, *args, log_path=log_path, pythonpath=pythonpath,
                 handler_url=handler_url)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
