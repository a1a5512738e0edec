"""Ctrl-C ends every command quietly: `stats --watch` stops at the first Ctrl-C wherever it
lands (no library may swallow the cancellation), and a Ctrl-C at any moment of the console
script's life, imports included, gives no traceback."""

from __future__ import annotations

import asyncio.events
import os
import signal
import subprocess
import threading
import time
from typing import Any

import pytest
import redis

from tests.helpers.cli import Run, console_script

ITERATIONS = 200


def test_watch_stops_at_a_ctrl_c_between_any_two_steps(
        cli: Run, redis_url: str, redis_sync: redis.Redis,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The Ctrl-C lands before each of the event loop's first callbacks in turn (connect,
    handshake, the first refreshes): every time, --watch stops there. On Python 3.11 an
    `asyncio.wait_for` (redis-py's, with a socket timeout) swallowed the one that landed as a
    command had just been written, and the watch went on for ever."""
    redis_sync.lpush("jobs", "a")
    real_run = asyncio.events.Handle._run
    step = {"n": 0, "ctrl_c_at": 0}

    def run_then_maybe_interrupt(handle: Any) -> None:
        step["n"] += 1
        if step["n"] == step["ctrl_c_at"]:
            os.kill(os.getpid(), signal.SIGINT)
        real_run(handle)

    monkeypatch.setattr(asyncio.events.Handle, "_run", run_then_maybe_interrupt)
    went_on = []
    for ctrl_c_at in range(1, 41):
        step.update(n=0, ctrl_c_at=ctrl_c_at)
        result = cli("stats", "--redis-url", redis_url, "--queue", "jobs", "--watch", "--json",
                     "--interval", "0.001", "--iterations", str(ITERATIONS))
        assert result.code == 0, result.err
        assert "Traceback" not in result.err
        if len(result.out.splitlines()) == ITERATIONS:
            went_on.append(ctrl_c_at)
    assert went_on == []


COMMANDS = [
    pytest.param(["stats", "--queue", "jobs", "--watch", "--interval", "0.2"], (0, 130),
                 id="stats-watch"),
    pytest.param(["enqueue", "jobs", "-"], (130,), id="enqueue-waiting-for-stdin"),
]


def _import_time_line(line: str) -> bool:
    return line.startswith("import time:")


@pytest.mark.parametrize("delay", [0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.35, 0.6, 1.0])
@pytest.mark.parametrize(("command", "codes"), COMMANDS)
def test_ctrl_c_at_any_moment_exits_quietly(redis_url: str, command: list[str],
                                            codes: tuple[int, ...], delay: float) -> None:
    """The clock starts when the CLI's first module (`taskqueue.cli.errors`) is imported, as
    `-X importtime` reports it: before that the interpreter itself starts up, which no code
    of the project can reach (a Ctrl-C there is CPython's own "init_import_site" failure)."""
    proc = subprocess.Popen([*console_script(), *command, "--redis-url", redis_url],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    assert proc.stderr is not None and proc.stdout is not None
    lines: list[str] = []
    started = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            lines.append(line)
            if _import_time_line(line) and line.split("|")[-1].strip() == \
                    "taskqueue.cli.errors":
                started.set()
        started.set()  # the process ended

    reader = threading.Thread(target=read_stderr)
    reader.start()
    try:
        assert started.wait(60), "the CLI did not start"
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        reader.join(timeout=30)
    said = [line for line in lines if not _import_time_line(line) and line.strip()]
    assert "Traceback" not in "\n".join(said), "\n".join(said)
    assert said in ([], ["taskqueue: interrupted"]), said
    assert proc.returncode in codes, (proc.returncode, said)
