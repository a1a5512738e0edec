"""The installed `taskqueue` console script, run as a subprocess, without a server: an
unreachable Redis exits 4, without a traceback."""

from __future__ import annotations

import shutil
import subprocess
import sys


def _taskqueue() -> list[str]:
    found = shutil.which("taskqueue")
    return [found] if found else [sys.executable, "-m", "taskqueue.cli.main"]


def test_unreachable_exits_4_without_traceback() -> None:
    from tests.fixtures.redis_server import free_port

    proc = subprocess.run([*_taskqueue(), "stats", "--queue", "jobs", "--redis-url",
                           f"redis://127.0.0.1:{free_port()}/0"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 4
    assert proc.stderr.startswith("taskqueue: cannot reach Redis")
    assert "Traceback" not in proc.stderr
