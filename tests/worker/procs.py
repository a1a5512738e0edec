"""Helpers to run `taskqueue-worker` as a real subprocess in tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.worker import handlers as test_handlers

ROOT = Path(__file__).resolve().parents[2]


def worker_argv(*args: str) -> list[str]:
    exe = shutil.which("taskqueue-worker")
    if exe:
        return [exe, *args]
    return [sys.executable, "-m", "taskqueue.worker.main", *args]


def spawn(redis_url: str, *args: str, log_path: Path | None = None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), test_handlers.URL_ENV: redis_url}
    env.pop("TASKQUEUE_MANIFEST", None)
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115
    return subprocess.Popen(worker_argv("--redis-url", redis_url, *args), env=env, cwd=ROOT,
                            stdout=out, stderr=subprocess.STDOUT if log_path else subprocess.PIPE)
